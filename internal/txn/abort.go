package txn

// What a failed transactional call does to the open transaction: abort it
// and rewind (blaming a partition when the failure names one), re-initialise
// the producer when the outcome is unknown, and have the handler reload its
// state. Read next to end and produce in loop.go, whose failures land here.

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaerr"
)

// onTxnError acts on a failed transactional call.
func (l *Loop) onTxnError(ctx context.Context, op string, err error) {
	if isWedged(err) {
		l.onWedged(ctx, op)
		return
	}
	if r, ok := l.handler.(MetadataRefuser); ok && kafkaerr.Is(err, kafka.ErrOffsetMetadataTooLarge) {
		if l.metadataRefused {
			// The handler commits no more than its partitions' last
			// accepted commits since it was told, so the brokers' limit
			// went below a set committed before: every commit of the
			// partition would be refused, after an abort and a rewind
			// to the same set, for ever.
			l.fatal = fmt.Errorf("%w: %s: the brokers refused a commit's offset metadata as too large again after parking stopped: "+
				"a parked set committed earlier is larger than their offset.metadata.max.bytes now; raise it until relay's partitions are read past "+
				"their parked sets (relay_key_parked_behind is 0), then lower it: %w", ErrFatal, op, err)
			return
		}
		l.metadataRefused = true
		r.MetadataRefused()
	}
	switch kafkaerr.Classify(err) {
	case kafkaerr.Fatal:
		l.onFatal(ctx, op, err)
	case kafkaerr.Abort:
		if l.set.StaticMember && kafkaerr.Is(err, kafka.ErrFencedInstanceID) {
			// The group coordinator refused the offsets: another member
			// holds this group.instance.id now, as when its heartbeat is
			// refused (see consumerError). An abort and a rewind would
			// only meet the refused consumer's errors.
			l.instanceFenced(fmt.Errorf("%s: %w", op, err))
			return
		}
		l.log.Warn("transaction must abort", "op", op, "err", err)
		if op == "begin" || kafkaerr.StaleGeneration(err) {
			// Nothing was delivered yet; or the group refused the
			// offsets of an old generation, and no delivery report
			// explains that.
			l.abort(ctx, op)
		} else {
			l.abortAsync(ctx, op)
		}
	default:
		// Retriable errors that outlived their attempts, and errors
		// librdkafka does not flag: the outcome is unknown, so it is not
		// guessed at (see reinit).
		l.log.Warn("transaction outcome unknown; re-initialising producer", "op", op, "err", err)
		l.reinitBlaming(ctx, op, kafkaerr.Undelivered(err))
	}
}

// abortAfterProduce ends the transaction after a failed Produce: a fatal
// error (the producer was fenced) goes through onFatal, anything else
// aborts. _STATE means an earlier delivery failed.
func (l *Loop) abortAfterProduce(ctx context.Context, err error) {
	switch {
	case kafkaerr.Classify(err) == kafkaerr.Fatal:
		l.onFatal(ctx, "produce", err)
	case kafkaerr.Is(err, kafka.ErrState):
		l.abortAsync(ctx, "produce")
	default:
		l.abort(ctx, "produce")
	}
}

// abort aborts the open transaction, rewinds to the committed offsets and
// holds back the partitions to blame, if known.
func (l *Loop) abort(ctx context.Context, why string) { l.abortBlaming(ctx, why, false) }

// abortAsync is abort for a failure the delivery reports explain.
func (l *Loop) abortAsync(ctx context.Context, why string) { l.abortBlaming(ctx, why, true) }

func (l *Loop) abortBlaming(ctx context.Context, why string, async bool) {
	if l.open && l.heldForVerdict(why, true) {
		return
	}
	if l.open {
		// Let the transaction's partitions finish registering first.
		// librdkafka sends EndTxn(abort) as soon as an AddPartitionsToTxn
		// is in flight; if that one is refused with
		// CONCURRENT_TRANSACTIONS (the coordinator still completing the
		// previous commit), the abort reaches a coordinator that never
		// saw this transaction and answers INVALID_TXN_STATE, which
		// librdkafka makes fatal. Flushing waits for the registration,
		// as a commit does.
		h := l.producer
		err := l.producerCall(h, "flush", func() error {
			h.Flush(int(l.set.OpTimeout / time.Millisecond))
			return nil
		})
		if err == nil {
			err = l.retry(ctx, "abort", func(c context.Context) error { return h.AbortTransaction(c) })
		}
		if isWedged(err) {
			l.onWedged(ctx, why)
			return
		}
		switch kafkaerr.Classify(err) {
		case kafkaerr.None:
			l.traceEnd(TxnAborted, len(l.first))
		case kafkaerr.Fatal:
			l.onFatal(ctx, "abort", err)
			return
		default:
			l.log.Warn("abort failed; re-initialising producer", "err", err)
			l.reinit(ctx, why)
			return
		}
	}
	l.obs.Aborted(why)
	l.handlerAborted()
	blamed := l.blame(async)
	l.rewind(ctx)
	if l.fatal != nil {
		return
	}
	if !l.hold(blamed) {
		l.pause(ctx)
	}
}

func (l *Loop) handlerAborted() {
	if tl, ok := l.handler.(TxnListener); ok {
		tl.OnAbort()
	}
}

// reinit replaces the producer when a transaction's outcome is unknown.
// InitTransactions with the same transactional.id makes the coordinator
// complete or abort whatever the old producer left open, and fences the old
// epoch so a delayed commit from it cannot land later. The committed offsets
// fetched afterwards (read_committed consumers ask for stable offsets,
// KIP-447) then say what happened. This is the client-side defence Jepsen's
// 2024 Bufstream analysis recommends against delayed transaction markers.
func (l *Loop) reinit(ctx context.Context, why string) { l.reinitBlaming(ctx, why, false) }

// reinitBlaming is reinit after a call that timed out (timedOut): when
// some of the transaction's output partitions took their records and
// others took none, the sources of the others are held back (see
// blameSilent), so one unwritable output partition does not fail every
// transaction of the instance.
func (l *Loop) reinitBlaming(ctx context.Context, why string, timedOut bool) {
	if l.heldForVerdict(why, false) {
		return
	}
	l.renew(ctx, why, timedOut, true)
}

// renew is reinitBlaming once nothing holds the new producer back; reload
// says whether the handler's state is read again (see reloadState).
func (l *Loop) renew(ctx context.Context, why string, timedOut, reload bool) {
	l.obs.Aborted(why)
	l.handlerAborted()
	h := l.producer
	l.closeProducer()
	var blamed map[tpKey]error
	if timedOut && l.open {
		blamed = l.blameSilent(h)
	}
	l.traceEnd(TxnUnknown, len(l.first))
	l.open = false
	l.deliveries.clear()
	if err := l.startProducer(ctx); err != nil {
		l.fatal = err
		return
	}
	l.rewind(ctx)
	if l.fatal != nil {
		return
	}
	if !l.hold(blamed) {
		l.pause(ctx)
	}
	if reload {
		l.reloadState(ctx)
	}
}

// reloadState makes the handler read its durable state again after a
// transaction whose outcome was unknown: OnAbort undid the transaction's
// changes in memory, but the commit may have landed. The new producer
// fenced the old one, so the transaction is settled now, and the state
// topic says how.
func (l *Loop) reloadState(ctx context.Context) {
	pl, ok := l.handler.(PartitionListener)
	if !ok || l.fatal != nil || len(l.assigned) == 0 {
		return
	}
	l.obs.Alive()
	tps := make([]kafka.TopicPartition, 0, len(l.assigned))
	for k := range l.assigned {
		tps = append(tps, k.at(0))
	}
	parts := numbers(tps)
	var err error
	if r, ok := l.handler.(StateReloader); ok {
		err = r.Reload(ctx, parts)
	} else {
		pl.OnRevoked(parts)
		err = pl.OnAssigned(ctx, parts)
	}
	if err != nil {
		l.fatal = fmt.Errorf("%w: reload state after an unknown commit outcome: %w", ErrFatal, err)
	}
}
