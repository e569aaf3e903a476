package txn

// This file holds the loop's one shape — Run, handle, end (the
// commit); its settings and state are in state.go. What a failed call does to the open transaction (abort,
// re-initialisation, reloading the handler's state) is in abort.go,
// positions (rewind, waits) in position.go, rebalances in rebalance.go,
// the producer's life and its calls (produce, retry) in producer.go, held
// partitions in stall.go, fences in fence.go, commit spans in trace.go.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaerr"
)

// Run consumes until ctx is done or a fatal error occurs. On ctx done it
// stops polling, ends the open transaction within ShutdownTimeout and closes
// both clients; it returns nil. A fatal error (e.g. fenced by a newer
// instance) is returned wrapped in ErrFatal, after closing the clients.
func (l *Loop) Run(ctx context.Context) (err error) {
	defer func() {
		err = errors.Join(err, l.close())
	}()
	// A panic (relay's crash handling reports it) must not let the
	// consumer's close commit: closing serves the revoke, and the revoke
	// commits the open transaction, whose batch may have applied records
	// past one that was never handled. Deferred after close, this runs
	// before it.
	defer func() {
		if v := recover(); v != nil {
			l.fatal = fmt.Errorf("%w: panic: %v", ErrFatal, v)
			panic(v) //nolint:forbidigo // re-raised for the crash handler, after marking the loop fatal
		}
	}()
	l.runCtx = ctx
	if st := l.set.SessionTimeout; st > 0 {
		l.freeze = newFreezeWatch(min(time.Second, st/10))
		defer l.freeze.close()
	}
	if err := l.startProducer(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := l.consumer.SubscribeTopics(l.set.Topics, l.onRebalance); err != nil {
		return fmt.Errorf("%w: subscribe %v: %w", ErrFatal, l.set.Topics, err)
	}
	// Not ready yet if the clients were refused while the producer
	// started.
	l.checkRefused(time.Time{})
	if !l.refused.on {
		l.obs.Ready(true)
	}
	defer l.obs.Ready(false)
	// A transaction still open when Run returns is left to the coordinator
	// (a fatal error, or one in the shutdown's commit): its span says so.
	defer func() { l.traceEnd(TxnAbandoned, len(l.first)) }()

	for ctx.Err() == nil && l.fatal == nil {
		if l.twin != nil {
			l.settleTwin(ctx)
			continue
		}
		l.obs.Alive()
		l.checkRefused(time.Time{})
		switch ev := l.consumer.Poll(l.pollTimeout()).(type) {
		case *kafka.Message:
			if bh, ok := l.handler.(BatchHandler); ok && bh.BatchSize() > 1 {
				l.batched(ctx, bh, ev)
			} else {
				l.handle(ctx, ev)
			}
		case kafka.Error:
			l.consumerError(ev)
		case *kafka.Stats:
			l.obs.Statistics(kindConsumer, ev.String())
		}
		if f, ok := l.handler.(Floors); ok && ctx.Err() == nil {
			l.handleDue(ctx, f)
		}
		if ctx.Err() != nil {
			// Stopping: the open transaction is committed below, under
			// the shutdown's own bound. Ended here it would run with the
			// cancelled context, which gives each call one try.
			break
		}
		if l.fatal == nil && l.twin == nil && l.open && l.due() {
			l.end(ctx, "interval")
		}
		l.resumeDue()
	}
	if l.fatal != nil {
		if ctx.Err() != nil && errors.Is(l.fatal, ctx.Err()) {
			// Shutdown interrupted a recovery; nothing is open.
			return nil
		}
		if errors.Is(l.fatal, ErrInstanceFenced) {
			l.release()
		}
		return l.fatal
	}
	// Graceful stop: the open transaction is ended with a fresh deadline,
	// not with the cancelled root context.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.set.ShutdownTimeout)
	defer cancel()
	if l.open && l.twin == nil {
		l.end(sctx, "shutdown")
	}
	return l.fatal
}

// due says whether the open transaction is to end: it is full, or has
// been open for CommitInterval. It keeps how long it has been open for
// the next poll's timeout, so that a round of the loop reads the clock
// once.
func (l *Loop) due() bool {
	if l.records >= l.set.MaxRecords {
		return true
	}
	now := time.Now()
	l.lastRound, l.round = l.round, now
	l.openFor = now.Sub(l.started)
	return l.openFor >= l.set.CommitInterval
}

// pollTimeout is the time left until the open transaction is due, so a quiet
// partition does not keep a transaction open past the commit interval. It
// counts from due's reading at the end of the round before (every round
// that leaves a transaction open ends with due): the rest of that round
// takes far less than the millisecond a timeout is counted in.
func (l *Loop) pollTimeout() int {
	const idle = 100 * time.Millisecond
	d := idle
	if l.open {
		d = l.set.CommitInterval - l.openFor
	}
	return int(min(max(d, time.Millisecond), idle) / time.Millisecond)
}

// consumerError stops relay on a fatal consumer error; other errors are
// librdkafka's to recover from.
func (l *Loop) consumerError(e kafka.Error) {
	if fencedInstance(e) {
		l.instanceFenced(fmt.Errorf("consumer: %w", e))
		return
	}
	if e.IsFatal() {
		l.fatal = fmt.Errorf("%w: consumer: %w", ErrFatal, e)
		return
	}
	if credentialError(e) {
		l.noteRefused("consumer", e)
	}
	l.log.Warn("consumer error", "err", e, "code", e.Code().String())
}

// instanceFenced ends the loop on the group coordinator's refusal of
// this member's group.instance.id. There is no membership left to end,
// and librdkafka's close of a consumer fenced this way did not return
// (30 s, until the watchdog gave up on it): close leaves it alone, and
// the process ends without it (see ClientsLeft).
func (l *Loop) instanceFenced(err error) {
	if l.open {
		// Undone now, before a revoke that may be under way forgets
		// the partitions' state (undone after it, it would come back).
		l.handlerAborted()
		l.open = false
	}
	l.detached.Store(true)
	l.fatal = fmt.Errorf("%w: %w: %w", ErrFatal, ErrInstanceFenced, err)
}

// admissible says whether m is to be handled, and gives its partition.
func (l *Loop) admissible(m *kafka.Message) (tpKey, bool) {
	if m.TopicPartition.Error != nil {
		l.log.Warn("consumer message error", "err", m.TopicPartition.Error)
		return tpKey{}, false
	}
	tp := keyOf(m.TopicPartition)
	return tp, l.takes(tp)
}

// takes says whether a record of tp is to be handled now.
func (l *Loop) takes(tp tpKey) bool {
	if !l.assigned[tp] {
		// A message fetched before a revoke is stale: its partition has
		// gone to another member and the offset must not be committed.
		return false
	}
	if _, waiting := l.paused[tp]; waiting {
		// Fetched before the partition was paused and rewound to a
		// record that is not due: it comes again after that record.
		return false
	}
	if st, ok := l.stalls[tp]; ok && st.held {
		// Fetched before the partition was held back: it comes again.
		return false
	}
	return true
}

// handle runs one source record through the handler and adds its outputs
// and offset to the open transaction.
func (l *Loop) handle(ctx context.Context, m *kafka.Message) {
	tp, ok := l.admissible(m)
	if !ok {
		return
	}
	l.handleRecord(ctx, tp, toRecord(m), false)
}

// handleRecord is handle's work on rec, a record of tp read now or kept
// aside by the handler (see Floors) and handed back: again.
func (l *Loop) handleRecord(ctx context.Context, tp tpKey, rec *Record, again bool) {
	l.include(tp, rec.Offset)
	if !l.begin(ctx) {
		return
	}
	outs, err := l.handler.Handle(l.handlerCtx(ctx), rec)
	if err != nil {
		if l.handlerFailed(ctx, tp, rec, err) {
			l.abort(ctx, "handler")
		}
		return
	}
	if err := l.produceAll(tp, rec, outs); err != nil {
		l.abortAfterProduce(ctx, err)
		return
	}
	l.applied(tp, rec.Offset, len(outs), again)
}

// handleDue hands a Floors handler's records whose turn has come to it
// again, until none is left or the transaction is full. A record of a
// partition not taken now (paused, held back) waits for a later round.
func (l *Loop) handleDue(ctx context.Context, f Floors) {
	var seen map[*Record]bool
	for l.fatal == nil && l.twin == nil && l.records < l.set.MaxRecords {
		handled := 0
		for _, rec := range f.Due() {
			tp := tpKey{topic: rec.Topic, partition: rec.Partition}
			if !l.takes(tp) || seen[rec] {
				// A record handed back twice would be a handler's bug:
				// it is not handled twice in one round.
				continue
			}
			if seen == nil {
				seen = map[*Record]bool{}
			}
			seen[rec] = true
			l.handleRecord(ctx, tp, rec, true)
			if !l.open || l.fatal != nil || l.twin != nil || ctx.Err() != nil {
				return // it did not go through: the transaction ended or waits for a verdict, or relay stops
			}
			handled++
			if l.due() {
				// Full, or open for the commit interval: it commits,
				// and the rest go in the next one.
				l.end(ctx, "interval")
				if !l.open && l.fatal == nil && ctx.Err() == nil {
					break // what is due may have changed
				}
				return
			}
		}
		if handled == 0 {
			return
		}
	}
}

// include makes tp part of the open transaction from offset on, whatever
// happens to that record: librdkafka's position is already past it, so if
// begin, the handler or a produce fails, the rewind must seek tp back too,
// or the next commit skips the record.
func (l *Loop) include(tp tpKey, offset int64) {
	if _, seen := l.first[tp]; !seen {
		l.first[tp] = offset
	}
}

// begin opens a transaction unless one is open; false: it could not, and
// the failure has been dealt with.
func (l *Loop) begin(ctx context.Context) bool {
	if l.twin != nil {
		// No producer to begin with until the verdict, and an open
		// transaction is the verdict's to settle.
		return false
	}
	if l.open && l.producer != nil {
		return true
	}
	h := l.producer
	if err := l.producerCall(h, "begin", func() error { return h.BeginTransaction() }); err != nil {
		l.onTxnError(ctx, "begin", err)
		return false
	}
	l.open, l.started = true, time.Now()
	l.clock, l.round, l.lastRound = time.Time{}, l.started, l.started
	l.assignsAtBegin = l.assigns
	if l.freeze != nil {
		l.freeze.reset()
	}
	l.txnFrom = h.produced
	l.traceBegin()
	return true
}

// applied counts a record whose outputs are written in the open
// transaction: its offset commits with it. (Records of a batch are
// applied in any order: the offset is past the furthest.) again says the
// handler kept the record aside and handed it back: it counted as
// consumed when read, not again.
func (l *Loop) applied(tp tpKey, offset int64, outputs int, again bool) {
	l.next[tp] = max(l.next[tp], offset+1)
	l.records++
	l.outputs += outputs
	if !again {
		l.obs.Consumed(1)
	}
}

// handlerFailed deals with a handler that gave no outputs for rec: a
// record not due makes its partition wait; a shutdown leaves the record
// in its source. abort says any other error: the transaction must be
// aborted. (Apart from handle, so that a record that passes pays for
// none of it.)
func (l *Loop) handlerFailed(ctx context.Context, tp tpKey, rec *Record, err error) (abort bool) {
	var notDue *NotDueError
	if errors.As(err, &notDue) {
		l.wait(tp, rec.Offset, notDue.Until)
		return false
	}
	if ctx.Err() != nil {
		// Shutting down: the handler gave up on the record, which
		// stays in its source; what was handled before it commits.
		l.log.Info("handler interrupted by shutdown; the record stays in its source",
			"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset)
		return false
	}
	l.log.Error("handler failed; aborting transaction, the record stays in its source",
		"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", err)
	l.suspect(tp, err)
	return true
}

// produceAll writes rec's outputs in the open transaction. On a failure
// it says so and returns the error: the transaction must be aborted.
func (l *Loop) produceAll(tp tpKey, rec *Record, outs []Output) error {
	for i := range outs {
		if err := l.produce(&outs[i]); err != nil {
			l.log.Error("produce failed; aborting transaction, the record stays in its source",
				"topic", outs[i].Topic, "partition", outs[i].Partition, "source_offset", rec.Offset, "err", err)
			if kafkaerr.PartitionFault(err) {
				// The output itself cannot be written. (Other errors are
				// no partition's fault: _STATE says an earlier delivery
				// failed, and its report names the partition; a full
				// queue is the brokers being slow.)
				l.suspect(tp, err)
			}
			return err
		}
		l.wrote(tp, &outs[i])
	}
	return nil
}
