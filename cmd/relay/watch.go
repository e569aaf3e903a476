package main

import (
	"context"
	"log/slog"
	"maps"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/ledger"
	"relay/internal/pipeline"
	"relay/internal/txn"
)

// ledgerWatch follows the quarantine ledger of the source partitions this
// instance owns, for the quarantine gauges: it reads their state-topic
// partitions (committed records) from the start, then keeps up, so the
// gauges see what the replay and discard commands write as well as relay.
// It counts only the failures of the source partitions the instance owns:
// two source topics with different partition counts can put partition p of
// each on different instances, and both would otherwise count state
// partition p.
type ledgerWatch struct {
	cfg     *config.Config
	topic   string
	index   *ledger.Index
	log     *slog.Logger
	changes chan ownership
}

// ownership is which sources' failures each state partition holds for
// this instance: state partition → source keys (topic|partition).
type ownership map[int32]map[string]bool

func sourceKey(topic string, partition int32) string {
	return topic + "|" + strconv.Itoa(int(partition))
}

// ownershipOf keeps the source partitions of an assignment (not tiers, not
// replay: their failures are their source's).
func ownershipOf(table *pipeline.Table, owned []txn.TopicPartition) ownership {
	o := ownership{}
	for _, tp := range owned {
		origin, ok := table.Of(tp.Topic)
		if !ok || origin.Tier >= 0 || origin.Replay {
			continue
		}
		if o[tp.Partition] == nil {
			o[tp.Partition] = map[string]bool{}
		}
		o[tp.Partition][sourceKey(tp.Topic, tp.Partition)] = true
	}
	return o
}

// diff says which state partitions to stop reading, and which to read
// (again) from the start: those whose set of owned sources changed.
func (o ownership) diff(next ownership) (stop, read []int32) {
	for p, srcs := range o {
		if n, ok := next[p]; !ok {
			stop = append(stop, p)
		} else if !maps.Equal(srcs, n) {
			stop, read = append(stop, p), append(read, p)
		}
	}
	for p := range next {
		if _, ok := o[p]; !ok {
			read = append(read, p)
		}
	}
	return stop, read
}

func newLedgerWatch(cfg *config.Config, log *slog.Logger) *ledgerWatch {
	return &ledgerWatch{cfg: cfg, topic: cfg.StateTopicName(), index: &ledger.Index{}, log: log, changes: make(chan ownership, 64)}
}

// run reads until ctx ends. A broker outage only delays the gauges.
func (w *ledgerWatch) run(ctx context.Context) {
	c, err := kafka.NewConsumer(clientConfig(w.cfg, producerOnly, kafka.ConfigMap{
		"group.id": w.cfg.GroupID + ".ledger-watch", "enable.auto.commit": false,
		"isolation.level": "read_committed",
	}))
	if err != nil {
		w.log.Error("quarantine gauges disabled: cannot create the ledger reader", "err", err)
		return
	}
	defer func() { _ = c.Close() }()
	owned := ownership{}
	for ctx.Err() == nil {
		for drained := false; !drained; {
			select {
			case next := <-w.changes:
				w.apply(c, owned, next)
				owned = next
			default:
				drained = true
			}
		}
		switch ev := c.Poll(200).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				continue
			}
			e, ok, err := ledger.Decode(string(ev.Key), ev.Value)
			if err != nil {
				w.log.Warn("unreadable ledger record", "err", err, "partition", ev.TopicPartition.Partition, "offset", ev.TopicPartition.Offset)
			}
			p := ev.TopicPartition.Partition
			if ok && e != nil && owned[p][sourceKey(e.Source.Topic, e.Source.Partition)] {
				w.index.Apply(p, e)
			}
		case kafka.Error:
			w.log.Debug("ledger reader", "err", ev)
		}
	}
}

func (w *ledgerWatch) apply(c *kafka.Consumer, owned, next ownership) {
	stop, read := owned.diff(next)
	tps := func(parts []int32) []kafka.TopicPartition {
		out := make([]kafka.TopicPartition, len(parts))
		for i, p := range parts {
			out[i] = kafka.TopicPartition{Topic: &w.topic, Partition: p, Offset: kafka.OffsetBeginning}
		}
		return out
	}
	w.index.Drop(stop)
	if len(stop) > 0 {
		if err := c.IncrementalUnassign(tps(stop)); err != nil {
			w.log.Warn("ledger reader: unassign", "err", err, "partitions", stop)
		}
	}
	if len(read) > 0 {
		if err := c.IncrementalAssign(tps(read)); err != nil {
			w.log.Warn("ledger reader: assign", "err", err, "partitions", read)
		}
	}
}

// watchedMachine is the machine that also tells the ledger watch which
// source partitions this instance owns.
type watchedMachine struct {
	*pipeline.Machine
	watch *ledgerWatch
}

// OnOwned implements txn.OwnershipListener.
func (m watchedMachine) OnOwned(owned []txn.TopicPartition) {
	m.watch.notify(ownershipOf(m.Table, owned))
}

// notify never blocks the transaction loop; a lost change only makes the
// gauges wrong, and says so.
func (w *ledgerWatch) notify(o ownership) {
	select {
	case w.changes <- o:
	default:
		w.log.Warn("quarantine gauges may be wrong: the ledger reader is behind on assignment changes")
	}
}

// retentionOf looks a quarantine topic's retention up in what the
// preflight read.
func retentionOf(ret map[string]time.Duration) func(string) (time.Duration, bool) {
	return func(topic string) (time.Duration, bool) {
		d, ok := ret[topic]
		return d, ok
	}
}
