package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/ledger"
	"relay/internal/pipeline"
)

// ledgerWatch follows the quarantine ledger of the partitions this
// instance owns, for the quarantine gauges: it reads their state-topic
// partitions (committed records) from the start, then keeps up, so the
// gauges see what the replay and discard commands write as well as relay.
type ledgerWatch struct {
	cfg     *config.Config
	topic   string
	index   *ledger.Index
	log     *slog.Logger
	changes chan assignment
}

type assignment struct {
	assigned bool
	parts    []int32
}

func newLedgerWatch(cfg *config.Config, log *slog.Logger) *ledgerWatch {
	return &ledgerWatch{cfg: cfg, topic: cfg.StateTopicName(), index: &ledger.Index{}, log: log, changes: make(chan assignment, 64)}
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
	for ctx.Err() == nil {
		for drained := false; !drained; {
			select {
			case a := <-w.changes:
				w.apply(c, a)
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
			if ok && e != nil {
				w.index.Apply(ev.TopicPartition.Partition, e)
			}
		case kafka.Error:
			w.log.Debug("ledger reader", "err", ev)
		}
	}
}

func (w *ledgerWatch) apply(c *kafka.Consumer, a assignment) {
	tps := make([]kafka.TopicPartition, len(a.parts))
	for i, p := range a.parts {
		tps[i] = kafka.TopicPartition{Topic: &w.topic, Partition: p, Offset: kafka.OffsetBeginning}
	}
	w.index.Drop(a.parts)
	var err error
	if a.assigned {
		err = c.IncrementalAssign(tps)
	} else {
		err = c.IncrementalUnassign(tps)
	}
	if err != nil {
		w.log.Warn("ledger reader assignment", "err", err, "partitions", a.parts)
	}
}

// watchedMachine is the machine that also tells the ledger watch which
// partitions this instance owns.
type watchedMachine struct {
	*pipeline.Machine
	watch *ledgerWatch
}

func (m watchedMachine) OnAssigned(ctx context.Context, partitions []int32) error {
	if err := m.Machine.OnAssigned(ctx, partitions); err != nil {
		return err
	}
	m.watch.notify(assignment{assigned: true, parts: partitions})
	return nil
}

func (m watchedMachine) OnRevoked(partitions []int32) {
	m.Machine.OnRevoked(partitions)
	m.watch.notify(assignment{assigned: false, parts: partitions})
}

// notify never blocks the transaction loop; a lost change only makes the
// gauges wrong, and says so.
func (w *ledgerWatch) notify(a assignment) {
	select {
	case w.changes <- a:
	default:
		w.log.Warn("quarantine gauges may be wrong: the ledger reader is behind on assignment changes", "partitions", a.parts)
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
