package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaerr"
)

// A fence usually means a zombie: another live instance started with the
// same transactional.id, and this one must stop (KIP-98). But a coordinator
// fences too when it aborts a transaction itself because the transaction
// outlived transaction.timeout.ms — after a broker restart longer than that
// timeout, a frozen process, a stuck call — by bumping the producer epoch;
// librdkafka then reports the old epoch's next call as _FENCED, and no other
// instance is involved. Stopping then would turn every rolling broker
// upgrade into relay restarts.
//
// The coordinator starts a transaction's clock when it first hears of it:
// at the first AddPartitionsToTxn, which the first produce or offset send
// makes — not at BeginTransaction, which stays local. So a fence it caused
// can only come once the open transaction is older than
// transaction.timeout.ms counted from there. Such a fence is recovered
// from: a new producer, a rewind to the committed offsets, as after an
// unknown commit outcome. A fence of a younger transaction is another
// instance's, and relay stops.
//
// An old transaction is not enough. If the process was frozen longer than
// session.timeout.ms (see freezeWatch), the loop has not polled for longer
// than max.poll.interval.ms, or the consumer says its assignment was lost,
// the group has moved on without this instance: a replacement sharing the
// transactional id may be running, and recovering would fence that live
// instance. A static member asks the group coordinator whether one is
// (see twin.go) and recovers when none is; a dynamic member cannot tell,
// and stops. A static member asks also when its assignment was lost at
// any time since its producer began, though the group has given the
// partitions back since: a twin that joined meanwhile bumped the epoch
// of this producer, whose next call, however much later, is fenced. (A slow handler or a call blocked by a broker outage keeps the
// membership — librdkafka heartbeats from its own thread — and is no
// reason.) Recoveries are bounded in time too (maxRecoveries within
// recoveryWindow), so two instances that share an id cannot fence each
// other in turn for long.

const (
	maxRecoveries  = 3
	recoveryWindow = 10 * time.Minute
)

// isFence reports whether err says this producer's epoch was fenced.
func isFence(err error) bool { return kafkaerr.Fenced(err) }

// mayRecover reports whether another recovery fits the bound, and if so
// counts it.
func (l *Loop) mayRecover() bool {
	now := time.Now()
	l.recoveries = recent(l.recoveries, now, recoveryWindow)
	if len(l.recoveries) >= maxRecoveries {
		return false
	}
	l.recoveries = append(l.recoveries, now)
	return true
}

// recent keeps the times of ts less than window before now, in place.
// Fence recoveries and wedges are both bounded by a count within a
// window.
func recent(ts []time.Time, now time.Time, window time.Duration) []time.Time {
	kept := ts[:0]
	for _, t := range ts {
		if now.Sub(t) < window {
			kept = append(kept, t)
		}
	}
	return kept
}

// expired reports whether the open transaction is older than
// transaction.timeout.ms, counted from when the coordinator may first
// have heard of it, so the coordinator may have aborted it.
func (l *Loop) expired() bool {
	return l.open && l.set.TxnTimeout > 0 && !l.clock.IsZero() && time.Since(l.clock) >= l.set.TxnTimeout
}

// zombie reports why this instance may have been replaced in its group
// (see the comment at the top): "" when nothing says so.
func (l *Loop) zombie() string {
	if st := l.set.SessionTimeout; st > 0 && l.open && l.freeze != nil {
		if frozen := l.freeze.frozen(time.Now()); frozen > st {
			return fmt.Sprintf("the process was frozen %s, longer than session.timeout.ms (%s)", frozen.Round(time.Millisecond), st)
		}
	}
	if mp := l.set.MaxPollInterval; mp > 0 && l.open {
		if since := max(l.round.Sub(l.lastRound), time.Since(l.round)); since > mp {
			return fmt.Sprintf("the loop has not polled for %s, longer than max.poll.interval.ms (%s)", since.Round(time.Millisecond), mp)
		}
	}
	if l.consumer.AssignmentLost() {
		return "the consumer lost its assignment"
	}
	if l.set.StaticMember && l.lostSinceInit {
		// The group gave the partitions back, but a twin may have
		// joined while they were gone and initialised a producer with
		// this transactional.id: this producer's next call is fenced,
		// though the twin has been refused the group.instance.id since.
		return "the consumer lost its assignment after this producer began, and may have shared its ids meanwhile"
	}
	return ""
}

// onFatal acts on an error librdkafka calls fatal. Recovered from, with a
// new producer: a fence of an expired transaction (the coordinator's),
// INVALID_TXN_STATE (the client's and the coordinator's view of the
// transaction disagree; no other instance is involved), and
// OUT_OF_ORDER_SEQUENCE_NUMBER at the head of a partition's requests
// (seen after a produce timed out in flight, possibly written, during a
// broker restart: the broker and the client then disagree on the next
// sequence under one epoch). librdkafka calls that a desynchronisation it
// cannot reason about; the Java client (KIP-360) bumps the epoch. A new producer does the same: its
// InitProducerId aborts whatever the old epoch wrote, possibly written
// records included, so no reader of committed data sees them. A fence after the
// group moved on waits for the coordinator's verdict on a twin (static
// members, twin.go). Anything else — a fence of a young transaction above
// all — stops relay.
func (l *Loop) onFatal(ctx context.Context, op string, err error) {
	if l.twin != nil {
		return // the fenced producer's later calls: the verdict decides
	}
	err = l.firstFatal(err)
	var why string
	zombie := l.zombie()
	if isFence(err) && zombie != "" && l.set.StaticMember {
		l.awaitTwin(op, zombie, err)
		return
	}
	switch {
	case kafkaerr.Is(err, kafka.ErrInvalidTxnState):
		why = "transaction state out of step with the coordinator"
	case kafkaerr.Is(err, kafka.ErrOutOfOrderSequenceNumber):
		why = "the producer's sequence numbers out of step with a broker's after a timed-out produce (librdkafka makes this fatal), not another instance"
	case isFence(err) && zombie != "":
		// Another instance's fence, however old the transaction.
	case isFence(err) && l.expired():
		why = "fenced by the coordinator: the transaction outlived transaction.timeout.ms (broker outage or a stalled process), not by another instance"
	case isFence(err) && l.selfFenced():
		why = "fenced by this instance's own abandoned producer, whose wedged InitTransactions got through late (see librdkafka call wedged), not by another instance"
	}
	if why != "" && zombie != "" && !l.set.StaticMember {
		// A new producer would fence whichever process holds this
		// transactional.id now, and a dynamic member cannot ask the group
		// whether one does (a static member's re-init waits for the
		// verdict instead: heldForVerdict).
		l.fatal = fmt.Errorf("%w: %s: %s after %s: a new producer could fence an instance that took this one's place, and this one stops rather than risk it: %w", ErrFatal, op, why, zombie, err)
		return
	}
	if why != "" && l.mayRecover() {
		l.log.Warn(why+"; starting a new producer and rewinding to the committed offsets", "op", op, "err", err,
			"recoveries_in_window", len(l.recoveries))
		l.reinit(ctx, op+" (recovered)")
		return
	}
	switch {
	case why != "":
		l.fatal = fmt.Errorf("%w: %s: %d recoveries within %s, giving up: %w", ErrFatal, op, maxRecoveries, recoveryWindow, err)
	case isFence(err) && zombie != "":
		l.fatal = fmt.Errorf("%w: %s: fenced after %s: another instance may have taken over this transactional.id, and this one stops rather than fence it back: %w", ErrFatal, op, zombie, err)
	case isFence(err):
		l.fatal = fmt.Errorf("%w: %s: fenced by another producer with this transactional.id (is RELAY_TRANSACTIONAL_ID shared by two instances?): %w", ErrFatal, op, err)
	default:
		l.fatal = fmt.Errorf("%w: %s: %w", ErrFatal, op, err)
	}
}

// firstFatal is err, or the producer's first fatal error when that was a
// fence and err is not: librdkafka reports the latest fatal error to a
// transactional call, so a fence followed by a late
// OUT_OF_ORDER_SEQUENCE_NUMBER reads as the second, which relay would
// recover from with a new producer, fencing the instance that fenced it.
func (l *Loop) firstFatal(err error) error {
	if l.producer == nil || isFence(err) {
		return err
	}
	if first := l.producer.GetFatalError(); first != nil && isFence(first) {
		return fmt.Errorf("%w (reported as: %w)", first, err)
	}
	return err
}
