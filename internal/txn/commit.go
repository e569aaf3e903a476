package txn

import (
	"context"
	"log/slog"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// The end of a transaction: the offsets it commits, and the commit.

// offsets are what the open transaction commits: each partition's next
// record, or a Floors handler's floor with its metadata.
func (l *Loop) offsets() []kafka.TopicPartition {
	offsets := make([]kafka.TopicPartition, 0, len(l.next))
	f, floors := l.handler.(Floors)
	for k, off := range l.next {
		if !floors {
			offsets = append(offsets, k.at(off))
			continue
		}
		// A record handed back is below what an earlier commit of its
		// partition stood for.
		off = max(off, l.handledTo[k])
		at, md := f.Floor(TopicPartition{Topic: k.topic, Partition: k.partition}, off)
		tp := k.at(at)
		tp.Metadata = &md
		offsets = append(offsets, tp)
	}
	return offsets
}

// clocked notes that the coordinator may hear of the open transaction
// from now on (a produce or an offset send registers it there).
func (l *Loop) clocked() {
	if l.clock.IsZero() {
		l.clock = time.Now()
	}
}

// end commits the open transaction: send offsets, then commit. On failure it
// aborts or re-initialises the producer and rewinds, as the error says.
func (l *Loop) end(ctx context.Context, why string) {
	if !l.open || l.twin != nil {
		// Nothing to end, or the transaction waits for the group
		// coordinator's verdict, which settles it (twin.go).
		return
	}
	if l.consumer.AssignmentLost() {
		// The group has moved on: its coordinator would refuse the
		// offsets, and the partitions may be another member's now.
		l.abort(ctx, "assignment lost")
		return
	}
	start := time.Now()
	offsets := l.offsets()
	var err error
	h := l.producer
	l.clocked()
	if len(offsets) > 0 {
		var cgm *kafka.ConsumerGroupMetadata
		cgm, err = l.consumer.GetConsumerGroupMetadata()
		if err == nil {
			err = l.retry(ctx, "send offsets", func(c context.Context) error {
				return h.SendOffsetsToTransaction(c, offsets, cgm)
			})
		}
	}
	if err == nil {
		err = l.retry(ctx, "commit", func(c context.Context) error { return h.CommitTransaction(c) })
	}
	if err != nil {
		l.onTxnError(ctx, "commit ("+why+")", err)
		return
	}
	if _, ok := l.handler.(Floors); ok {
		for k, off := range l.next {
			l.handledTo[k] = max(l.handledTo[k], off)
		}
	}
	l.obs.Committed(l.records, l.outputs, time.Since(start))
	l.checkRefused(l.started)
	if tl, ok := l.handler.(TxnListener); ok {
		tl.OnCommit()
	}
	if l.log.Enabled(ctx, slog.LevelDebug) { // else its arguments are built for nothing
		l.log.Debug("transaction committed", "records", l.records, "partitions", len(offsets), "why", why)
	}
	l.traceEnd(TxnCommitted, len(offsets))
	l.unstall()
	l.deliveries.clear() // reports of transactions aborted before
	l.reset()
	l.backoff.Reset()
}
