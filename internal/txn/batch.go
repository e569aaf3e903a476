package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// BatchHandler is a Handler that handles several records at once, so that
// their slow steps (a hook call) overlap instead of each record waiting
// for the one before it. The loop hands it the records one poll brought,
// and applies each result as it comes, in the open transaction.
type BatchHandler interface {
	Handler
	// BatchSize is how many records the loop hands at once at most;
	// below 2 the loop calls Handle, one record at a time.
	BatchSize() int
	// HandleBatch handles recs. It asks b.Start(i) before it starts
	// record i, once per record and in the order of recs; a record
	// refused is not handled. It gives each started record's result to
	// b.Done, from the calling goroutine, with the meaning of Handle's
	// results, in any order: the handler keeps the order its records
	// need among themselves (a key's records, a partition's that may not
	// be due). Once Done returns false it starts nothing more and gives
	// no more results; it returns when nothing it started is running.
	// Records started before ctx ends are finished: ctx ending only
	// makes Start refuse the rest.
	HandleBatch(ctx context.Context, recs []*Record, b Batch)
}

// Batch is the loop's side of HandleBatch.
type Batch interface {
	Start(i int) bool
	Done(i int, outs []Output, err error) bool
}

// batch is one HandleBatch: which of its records were started and applied
// (their outputs written, their offsets counted), and what, if anything,
// must end the transaction once the handler returns.
type batch struct {
	l    *Loop
	ctx  context.Context //nolint:containedctx // Run's, for Start to refuse records once it is done
	recs []*Record
	tps  []tpKey
	// state of each record
	started []bool
	applied []bool
	// stopped are the partitions one of whose records was not applied,
	// with its offset: none of their later records may be.
	stopped map[tpKey]int64
	// deferred are the partitions whose records the loop refused because
	// the transaction is due, with the first one's offset: the partition
	// is sought back to it after the batch.
	deferred map[tpKey]int64
	ended    bool
	begun    time.Time // when the handler got the batch
	// dueDeferred says records were deferred because the transaction
	// was due.
	dueDeferred bool
	// What ends the transaction after the batch.
	handlerErr error
	produceErr error
}

// batched handles first and what else is at hand as one batch. The
// batch's size adapts: a batch that had to defer records because the
// transaction was due (its records' calls are slow) makes the next one
// half as large, so slow calls do not make every batch seek back; a batch
// that was full and did not makes the next a quarter larger, up to the
// handler's size.
func (l *Loop) batched(ctx context.Context, bh BatchHandler, first *kafka.Message) {
	size := bh.BatchSize()
	if l.batchCap == 0 || l.batchCap > size {
		l.batchCap = size
	}
	msgs := l.pollBatch(first, l.batchCap)
	switch deferred := l.handleBatch(ctx, bh, msgs); {
	case deferred:
		l.batchCap = max(l.batchCap/2, minBatch)
	case len(msgs) >= l.batchCap:
		l.batchCap = min(l.batchCap+max(l.batchCap/4, 1), size)
	}
}

// minBatch is the smallest size batched makes a batch.
const minBatch = 16

// pollBatch takes first and what else the consumer has at hand, up to
// the batch size and the records the open transaction may still take. A
// rebalance while polling ends the open transaction and may reset the
// positions of every partition (relay uses the eager range assignor):
// what was polled before it is dropped, to be fetched again from the
// positions the rebalance set.
func (l *Loop) pollBatch(first *kafka.Message, size int) []*kafka.Message {
	size = min(size, max(l.set.MaxRecords-l.records, 1))
	msgs := append(make([]*kafka.Message, 0, size), first)
	for len(msgs) < size && l.fatal == nil {
		before := l.rebalances
		ev := l.consumer.Poll(0)
		if l.rebalances != before {
			return nil
		}
		switch e := ev.(type) {
		case *kafka.Message:
			msgs = append(msgs, e)
			continue
		case kafka.Error:
			l.consumerError(e)
		case *kafka.Stats:
			l.obs.Statistics(kindConsumer, e.String())
			continue
		}
		break
	}
	return msgs
}

// handleBatch runs msgs through the BatchHandler and applies each result
// as HandleBatch gives it; a failure ends the transaction afterwards, as
// handle's would. deferred says whether records were left for the next
// transaction because this one was due.
func (l *Loop) handleBatch(ctx context.Context, bh BatchHandler, msgs []*kafka.Message) (deferred bool) {
	if l.fatal != nil {
		return false // polling met a fatal error: relay stops, nothing commits
	}
	b := &batch{l: l, ctx: ctx, stopped: map[tpKey]int64{}, deferred: map[tpKey]int64{}}
	for _, m := range msgs {
		tp, ok := l.admissible(m)
		if !ok {
			continue
		}
		// Every record handed over is in the transaction from here on:
		// an abort must seek its partition back too, whether or not
		// the handler starts it.
		l.include(tp, int64(m.TopicPartition.Offset))
		b.recs = append(b.recs, toRecord(m))
		b.tps = append(b.tps, tp)
	}
	if len(b.recs) == 0 {
		return false
	}
	if !l.begin(ctx) {
		return false
	}
	b.started, b.applied = make([]bool, len(b.recs)), make([]bool, len(b.recs))
	b.begun = time.Now()
	bh.HandleBatch(l.handlerCtx(ctx), b.recs, b)
	b.deferRest()
	switch {
	case l.fatal != nil:
	case b.handlerErr != nil:
		l.abort(ctx, "handler")
	case b.produceErr != nil:
		l.abortAfterProduce(ctx, b.produceErr)
	case b.gap():
		// Never expected: a record applied after an earlier one of its
		// partition that was not, or a started one left without a
		// result. Committing would skip it.
		l.log.Error("batch left a record of a partition behind; aborting, the records stay in their sources")
		l.abort(ctx, "batch")
	default:
		b.seekDeferred()
		return b.dueDeferred
	}
	return false
}

// deferRest defers every record the handler never asked to start (and
// that no earlier record of its partition covers): it is fetched again,
// like a record refused because the transaction was due.
func (b *batch) deferRest() {
	for i, tp := range b.tps {
		off := b.recs[i].Offset
		if b.applied[i] || b.started[i] || b.covered(tp, off) {
			continue
		}
		if d, ok := b.deferred[tp]; !ok || off < d {
			b.deferred[tp] = off
		}
	}
}

// seekDeferred seeks each partition with deferred records back to the
// first: they are fetched again for the next transaction.
func (b *batch) seekDeferred() {
	for tp, off := range b.deferred {
		if _, waiting := b.l.paused[tp]; waiting {
			continue // sought back to an earlier record already
		}
		if stop, ok := b.stopped[tp]; ok && stop <= off {
			continue // not applied from an earlier record on: stopping or sought
		}
		if err := b.l.consumer.Seek(tp.at(off), 0); err != nil {
			b.l.fatal = fmt.Errorf("%w: seek %s to %d: %w", ErrFatal, tp, off, err)
			return
		}
	}
}

// Start implements Batch: a record is started unless relay is stopping,
// the transaction is ending, or its partition may not go on (it waits
// for a record not yet due, or one of its records was not applied). Once
// the transaction is due and the batch has had a commit interval of its
// own (a transaction can be due as a batch begins), the rest of the batch
// is deferred to the next transaction: a batch keeps the transaction open
// at most two commit intervals and the tries it started.
func (b *batch) Start(i int) bool {
	tp, off := b.tps[i], b.recs[i].Offset
	if b.ended || b.l.fatal != nil || b.ctx.Err() != nil || b.isStopped(tp, off) {
		return false
	}
	if _, waiting := b.l.paused[tp]; waiting {
		return false
	}
	if b.l.due() && time.Since(b.begun) >= b.l.set.CommitInterval {
		if _, ok := b.deferred[tp]; !ok {
			b.deferred[tp] = off
		}
		b.dueDeferred = true
		return false
	}
	if _, ok := b.deferred[tp]; ok {
		return false // never started past a deferred record
	}
	b.started[i] = true
	return true
}

// isStopped says whether a record of tp at off comes after one that was
// not applied.
func (b *batch) isStopped(tp tpKey, off int64) bool {
	stop, ok := b.stopped[tp]
	return ok && off > stop
}

// stop notes that tp's record at off was not applied.
func (b *batch) stop(tp tpKey, off int64) {
	if stop, ok := b.stopped[tp]; !ok || off < stop {
		b.stopped[tp] = off
	}
}

// Done implements Batch: it applies record i's result in the open
// transaction; false ends the batch.
func (b *batch) Done(i int, outs []Output, err error) bool {
	l, tp, rec := b.l, b.tps[i], b.recs[i]
	l.obs.Alive()
	switch {
	case b.ended:
		return false
	case !b.started[i] || b.applied[i]:
		b.handlerErr = errors.New("result of a record the handler was not allowed to start, or a second one")
		b.ended = true
		return false
	case b.isStopped(tp, rec.Offset):
		// Its partition already stopped before it: it must not be
		// applied. (The handler keeps records that may stop their
		// partition in order, so this is not expected.)
		b.handlerErr = errors.New("result of a record past one of its partition that was not applied")
		b.ended = true
		return false
	}
	if err != nil {
		b.stop(tp, rec.Offset)
		if l.handlerFailed(b.ctx, tp, rec, err) {
			b.handlerErr, b.ended = err, true
			return false
		}
		return l.fatal == nil
	}
	if err := l.produceAll(tp, rec, outs); err != nil {
		b.produceErr, b.ended = err, true
		return false
	}
	// Results come in any order: gap (after the batch) checks that
	// nothing before the furthest applied was left out.
	l.applied(tp, rec.Offset, len(outs), false)
	b.applied[i] = true
	return true
}

// gap says whether a record was applied past a record of its partition,
// handed to the handler, that was not; or whether a started record was
// left without a result, its partition neither stopped nor deferred at or
// before it (the consumer's position is past it: a commit would skip it).
func (b *batch) gap() bool {
	missing := map[tpKey]bool{}
	for i, tp := range b.tps {
		switch {
		case !b.applied[i]:
			missing[tp] = true
			if b.started[i] && !b.covered(tp, b.recs[i].Offset) {
				return true
			}
		case missing[tp]:
			return true
		}
	}
	return false
}

// covered says whether tp is fetched again from off or before.
func (b *batch) covered(tp tpKey, off int64) bool {
	if stop, ok := b.stopped[tp]; ok && stop <= off {
		return true
	}
	if d, ok := b.deferred[tp]; ok && d <= off {
		return true
	}
	return false
}
