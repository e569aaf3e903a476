// Package ledgerwatch follows the quarantine ledger in the state topic for
// the source partitions this instance owns. It reads their state-topic
// partitions (committed records) from the start and then keeps up, so it
// sees what the replay and discard commands write as well as relay. It
// feeds the quarantine gauges (Summary) and tells the failure state machine
// whether a failure was discarded (Discards).
package ledgerwatch

import (
	"context"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaclient"
	"relay/internal/ledger"
	"relay/internal/pipeline"
	"relay/internal/txn"
)

// Watch follows the quarantine ledger of the source partitions this
// instance owns. It feeds the quarantine gauges (index) and the discards
// the machine checks at a replayed record's turn (discards).
// The gauges count only the failures of the source partitions the instance
// owns: two source topics with different partition counts can put
// partition p of each on different instances, and both would otherwise
// count state partition p.
type Watch struct {
	cfg      *config.Config
	topic    string
	c        *kafka.Consumer
	index    *ledger.Index
	discards *discardView
	log      *slog.Logger
	mu       sync.Mutex
	latest   ownership     // the newest assignment, for Run to apply
	changed  chan struct{} // signals that latest changed
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

// endTimeout bounds the ListOffsets request of a discard check: it is
// made inside a transaction, so it is small next to the in-place retry
// budget; past it the record waits and is tried again.
const endTimeout = 500 * time.Millisecond

// New creates the watch's reader: without it relay cannot see discards, so
// it does not start.
func New(cfg *config.Config, log *slog.Logger) (*Watch, error) {
	// The end past a commit marker is learnt from the next fetch's
	// answer: with librdkafka's 500 ms, a replayed record would wait that
	// long for its discard check (measured); 100 ms.
	c, err := kafkaclient.Reader(cfg, cfg.GroupID+".ledger-watch", kafkaclient.Read{EOF: true, FetchWaitMaxMs: 100})
	if err != nil {
		return nil, err
	}
	w := &Watch{cfg: cfg, topic: cfg.StateTopicName(), c: c, index: &ledger.Index{}, log: log, changed: make(chan struct{}, 1)}
	w.discards = newDiscardView(w.end, endTimeout)
	return w, nil
}

// end is state partition p's last stable offset: a read_committed client
// is told that as the high watermark.
func (w *Watch) end(p int32, timeout time.Duration) (int64, error) {
	_, high, err := w.c.QueryWatermarkOffsets(w.topic, p, int(timeout/time.Millisecond))
	return high, err
}

// Close closes the reader; only after Run has returned and nothing asks
// the discards any more.
func (w *Watch) Close() { _ = w.c.Close() }

// Discards is what the watch has read of the discards: the machine's
// pipeline.Discards.
func (w *Watch) Discards() pipeline.Discards { return w.discards }

// Summary summarises the failures of the owned source partitions for the
// quarantine gauges; retention is each quarantine topic's finite retention.
func (w *Watch) Summary(retention map[string]time.Duration) ledger.Summary {
	return w.index.Summary(func(topic string) (time.Duration, bool) {
		d, ok := retention[topic]
		return d, ok
	})
}

// Run reads until ctx ends. A broker outage delays the gauges, and makes
// replayed records wait (see discardView).
func (w *Watch) Run(ctx context.Context) {
	owned := ownership{}
	for ctx.Err() == nil {
		select {
		case <-w.changed:
			w.mu.Lock()
			next := w.latest
			w.mu.Unlock()
			w.apply(owned, next)
			owned = next
		default:
		}
		switch ev := w.c.Poll(200).(type) {
		case *kafka.Message:
			w.read(ev, owned)
		case kafka.PartitionEOF:
			w.discards.reached(ev.Partition, int64(ev.Offset))
		case nil:
			w.idle()
		case kafka.Error:
			w.log.Debug("ledger reader", "err", ev)
		}
	}
}

func (w *Watch) read(m *kafka.Message, owned ownership) {
	if m.TopicPartition.Error != nil {
		return
	}
	p := m.TopicPartition.Partition
	e, ok, err := ledger.Decode(string(m.Key), m.Value)
	if err != nil {
		w.log.Warn("unreadable ledger record", "err", err, "partition", p, "offset", m.TopicPartition.Offset)
	}
	if !ok {
		e = nil
	}
	if w.discards.saw(p, int64(m.TopicPartition.Offset), e) {
		w.log.Info("failure discarded", "id", e.ID, "actor", e.Actor, "replay_count", e.ReplayCount)
	}
	if e != nil && owned[p][sourceKey(e.Source.Topic, e.Source.Partition)] {
		w.index.Apply(p, e)
	}
}

// idle notes the reader's positions: transaction markers and aborted
// records move them without a message.
func (w *Watch) idle() {
	parts, err := w.c.Assignment()
	if err != nil || len(parts) == 0 {
		return
	}
	pos, err := w.c.Position(parts)
	if err != nil {
		return
	}
	for _, tp := range pos {
		if tp.Offset >= 0 {
			w.discards.reached(tp.Partition, int64(tp.Offset))
		}
	}
}

func (w *Watch) apply(owned, next ownership) {
	c := w.c
	stop, read := owned.diff(next)
	tps := func(parts []int32) []kafka.TopicPartition {
		out := make([]kafka.TopicPartition, len(parts))
		for i, p := range parts {
			out[i] = kafka.TopicPartition{Topic: &w.topic, Partition: p, Offset: kafka.OffsetBeginning}
		}
		return out
	}
	w.index.Drop(stop)
	w.discards.stop(stop)
	w.discards.start(read)
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

// Own tells the watch the whole assignment of the instance after a
// change (as a txn.OwnershipListener hears it); table tells its source
// partitions from tier and replay ones. It never blocks the transaction
// loop.
func (w *Watch) Own(table *pipeline.Table, owned []txn.TopicPartition) {
	w.notify(ownershipOf(table, owned))
}

// notify never blocks the transaction loop: the watch applies the newest
// assignment it was told.
func (w *Watch) notify(o ownership) {
	w.mu.Lock()
	w.latest = o
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default: // a change is signalled already; Run reads the newest
	}
}
