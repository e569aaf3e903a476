package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaerr"
)

// rewind seeks every partition of the ended transaction back to its committed
// offset, or to the transaction's first offset if nothing was ever committed
// there, and clears the transaction state.
func (l *Loop) rewind(ctx context.Context) {
	defer l.reset()
	var parts []kafka.TopicPartition
	for k, off := range l.first {
		if l.assigned[k] {
			parts = append(parts, k.at(off))
		}
	}
	if len(parts) == 0 {
		return
	}
	committed, err := l.committedOf(ctx, parts)
	if err != nil {
		l.fatal = err
		return
	}
	for _, c := range committed {
		k := keyOf(c)
		delete(l.handledTo, k) // read again from its commit
		target := int64(c.Offset)
		if target < 0 {
			target = l.first[k]
		}
		if _, waiting := l.paused[k]; waiting {
			// The rewind goes back before the record it waited for;
			// the records in between are due now (the handler keeps
			// the wait of the record itself).
			delete(l.paused, k)
			if err := l.resume(k); err != nil {
				l.fatal = err
				return
			}
		}
		if err := l.consumer.Seek(k.at(target), 0); err != nil {
			l.fatal = fmt.Errorf("%w: rewind %s to %d: %w", ErrFatal, k, target, err)
			return
		}
		l.log.Info("rewound partition", "topic", k.topic, "partition", k.partition, "offset", target)
		if err := l.resumeFrom(c, target); err != nil {
			l.fatal = err
			return
		}
	}
}

// committedOf fetches the committed offsets (and their metadata) of
// parts. Without them relay cannot tell where to resume, so it waits for
// them; consuming on would commit past lost records.
func (l *Loop) committedOf(ctx context.Context, parts []kafka.TopicPartition) ([]kafka.TopicPartition, error) {
	var committed []kafka.TopicPartition
	err := l.persist(ctx, "fetch committed offsets", func() (err error) {
		err = l.consumerCall("committed", l.set.WedgeAfter, func() (err error) {
			committed, err = l.consumer.Committed(parts, int(l.set.OpTimeout/time.Millisecond))
			return err
		})
		if err != nil {
			return err
		}
		// A partition answered with an error (its offset then reads
		// -1001, like "never committed") is asked again: reading it as
		// "nothing committed" would seek before a commit that landed
		// and handle its records twice.
		for _, c := range committed {
			if c.Error == nil {
				continue
			}
			if !kafkaerr.Transient(c.Error) {
				// Asking again will not help (not authorised, no such
				// topic): stop rather than spin without polling.
				return fmt.Errorf("%w: committed offset of %s: %w", ErrFatal, keyOf(c), c.Error)
			}
			return fmt.Errorf("committed offset of %s: %w", keyOf(c), c.Error)
		}
		return nil
	})
	return committed, err
}

// resumeFrom tells a Floors handler that a partition is read again from
// at, with the metadata committed there (c, as Committed answered it).
func (l *Loop) resumeFrom(c kafka.TopicPartition, at int64) error {
	f, ok := l.handler.(Floors)
	if !ok {
		return nil
	}
	k, md := keyOf(c), ""
	if c.Metadata != nil && int64(c.Offset) >= 0 {
		md = *c.Metadata
	}
	if err := f.Resume(TopicPartition{Topic: k.topic, Partition: k.partition}, at, md); err != nil {
		return fmt.Errorf("%w: resume %s at %d: %w", ErrFatal, k, at, err)
	}
	return nil
}

// wait pauses a partition until its head record is due and seeks back to
// that record. The open transaction goes on: it commits the partition only
// up to the record before.
func (l *Loop) wait(tp tpKey, offset int64, until time.Time) {
	parts := []kafka.TopicPartition{tp.at(offset)}
	if err := l.consumer.Pause(parts); err != nil {
		l.fatal = fmt.Errorf("%w: pause %s: %w", ErrFatal, tp, err)
		return
	}
	if err := l.consumer.Seek(tp.at(offset), 0); err != nil {
		l.fatal = fmt.Errorf("%w: seek %s to %d: %w", ErrFatal, tp, offset, err)
		return
	}
	l.paused[tp] = until
	l.log.Debug("partition waits for its head record", "partition", tp.String(), "offset", offset, "until", until)
}

// resumeDue resumes the paused partitions whose head record is due.
func (l *Loop) resumeDue() {
	if len(l.stalls) > 0 {
		l.resumeStalls(time.Now())
	}
	if len(l.paused) == 0 {
		return
	}
	now := time.Now()
	for tp, until := range l.paused {
		if !now.Before(until) {
			delete(l.paused, tp)
			if err := l.resume(tp); err != nil {
				l.fatal = err
				return
			}
		}
	}
}

// resume resumes a partition unless it is held back as stalled.
func (l *Loop) resume(tp tpKey) error {
	if st, ok := l.stalls[tp]; ok && st.held {
		return nil // it resumes when the stall's wait ends
	}
	if err := l.consumer.Resume([]kafka.TopicPartition{tp.at(0)}); err != nil {
		return fmt.Errorf("%w: resume %s: %w", ErrFatal, tp, err)
	}
	return nil
}

// pause backs off after an abort so a persistent cause (a missing topic, a
// broken handler) does not spin; it stays far below max.poll.interval.ms.
func (l *Loop) pause(ctx context.Context) {
	t := time.NewTimer(l.backoff.NextBackOff())
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (l *Loop) reset() {
	l.traceEnd(TxnAborted, len(l.first))
	l.open, l.records, l.outputs = false, 0, 0
	clear(l.next)
	clear(l.first)
	clear(l.suspects)
	clear(l.outSrc)
}
