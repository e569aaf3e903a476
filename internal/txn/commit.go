package txn

import (
	"context"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// commitOp is one transaction's commit (send offsets, then commit) running
// on its own goroutine. The loop owns it: it starts it, and always receives
// its result before it touches the producer again or closes it.
type commitOp struct {
	why              string
	records, outputs int
	started          time.Time
	done             chan error // one result, buffered
}

// beginCommit starts committing the open transaction in the background. The
// producer is not used by the loop until the commit's result is collected.
func (l *Loop) beginCommit(ctx context.Context, why string) {
	offsets := make([]kafka.TopicPartition, 0, len(l.next))
	for k, off := range l.next {
		offsets = append(offsets, k.at(off))
	}
	cgm, err := l.consumer.GetConsumerGroupMetadata()
	if err != nil {
		l.onTxnError(ctx, "group metadata ("+why+")", err)
		return
	}
	op := &commitOp{why: why, records: l.records, outputs: l.outputs, started: time.Now(), done: make(chan error, 1)}
	l.committing = op
	p := l.producer
	go func() {
		var err error
		if len(offsets) > 0 {
			err = l.retry(ctx, func(c context.Context) error { return p.SendOffsetsToTransaction(c, offsets, cgm) })
		}
		if err == nil {
			err = l.retry(ctx, p.CommitTransaction)
		}
		op.done <- err
	}()
}

// collect finishes the background commit if its result is in.
func (l *Loop) collect(ctx context.Context) {
	select {
	case err := <-l.committing.done:
		l.finishCommit(ctx, err)
	default:
	}
}

// await waits for the background commit, if any, and finishes it.
func (l *Loop) await(ctx context.Context) {
	if l.committing != nil {
		l.finishCommit(ctx, <-l.committing.done)
	}
}

// finishCommit acts on a commit's result. After a success, the records held
// meanwhile are handled into the next transaction; after a failure they go
// back with everything else (see rewind).
func (l *Loop) finishCommit(ctx context.Context, err error) {
	op := l.committing
	l.committing = nil
	if err != nil {
		l.onTxnError(ctx, "commit ("+op.why+")", err)
		return
	}
	l.obs.Committed(op.records, op.outputs, time.Since(op.started))
	l.log.Debug("transaction committed", "records", op.records, "why", op.why)
	l.reset()
	l.backoff = 0
	// A rewind during handling (handler or produce failure) empties held,
	// which ends this loop: what was not handled goes back with the rest.
	for len(l.held) > 0 && l.fatal == nil {
		m := l.held[0]
		l.held = l.held[1:]
		l.handle(ctx, m)
	}
	l.held = nil
	// held is bounded by MaxRecords, so the new transaction may be full.
	if l.open && l.fatal == nil && l.records >= l.set.MaxRecords {
		l.beginCommit(ctx, "max records")
	}
}

// end commits the open transaction and waits for the outcome: on revoke and
// on shutdown, where the partitions or the process are about to go.
func (l *Loop) end(ctx context.Context, why string) {
	// Finishing a background commit can open a transaction for the records
	// held meanwhile: loop until nothing is open or committing.
	for l.committing != nil || (l.open && l.fatal == nil) {
		if l.committing != nil {
			l.await(ctx)
		} else {
			l.beginCommit(ctx, why)
		}
	}
}

// retry makes a transactional call, each attempt with its own deadline,
// again while librdkafka says the error is retriable.
func (l *Loop) retry(ctx context.Context, call func(context.Context) error) error {
	var err error
	for range opAttempts {
		// A call in flight is not cut short by shutdown: a commit that
		// is about to succeed should. Each call has its own deadline.
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.set.OpTimeout)
		err = call(c)
		cancel()
		if classify(err) != kindRetriable || ctx.Err() != nil {
			return err
		}
	}
	return err
}
