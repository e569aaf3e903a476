package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// A fence after a freeze past session.timeout.ms, a loop that did not poll
// for max.poll.interval.ms, or a lost assignment (see zombie) may be a
// twin's: another live process with this transactional.id. Or it may be
// the coordinator's own abort of a transaction that outlived its timeout
// while the group moved on — a broker away longer than the transaction
// timeout, a long GC pause, a stalled VM — with no twin anywhere. Stopping
// in the second case turns every such event into a restart, and a pod
// that exits during a rolling broker upgrade crash-loops.
//
// A static member (group.instance.id, KIP-345) tells the two apart: a twin
// carries the same group.instance.id, and the group coordinator lets one
// live member hold it. When a twin has joined, this member's next
// heartbeat is refused with FENCED_INSTANCE_ID, which librdkafka raises as
// the consumer's fatal error; when none has, the coordinator answers
// UNKNOWN_MEMBER_ID (the member expired) and librdkafka rejoins, or the
// member was never expired and the heartbeat passes. So on such a fence
// relay holds the producer back (a new one would fence a twin's) and
// polls the consumer until the coordinator has spoken: FENCED_INSTANCE_ID
// ends the loop with ErrInstanceFenced, and its caller watches the group
// to tell a live twin (relay stops) from a stale holder (relay rejoins
// with a new consumer; see the daemon's rejoin.go); a new assignment, or
// the bound passing without a refusal, means no twin holds the id, and
// relay starts a new producer and rewinds to the committed offsets, as
// after any coordinator fence. Exactly once
// does not rest on this verdict — the producer epoch and the group
// generation (KIP-447) fence whatever a wrong guess would write — only
// which of two processes keeps running does.

// twinCheck is a fence waiting for the group coordinator's verdict.
type twinCheck struct {
	op, why string
	err     error
	since   time.Time
	assigns int // l.assigns when the wait began
	// abort says the held call was an abort: the transaction did not
	// commit.
	abort bool
}

// twinWait bounds the wait for a verdict: a member's heartbeat goes out
// every heartbeat.interval.ms, well within session.timeout.ms, and the
// first one after a freeze gets the coordinator's answer.
func (l *Loop) twinWait() time.Duration {
	return l.set.SessionTimeout + l.set.OpTimeout
}

// awaitTwin starts the wait for the coordinator's verdict on the fence err
// of op, which zombie explained by why. A consumer that has been given
// partitions since the transaction began has rejoined already, after the
// event: its membership is the verdict, and relay recovers at once.
func (l *Loop) awaitTwin(op, why string, err error) {
	what := "fenced"
	if errors.Is(err, errEpochBump) {
		what = "a call that may bump the producer epoch held back"
	}
	l.log.Warn(what+" after "+why+"; asking the group coordinator whether another instance holds this group.instance.id before starting a new producer",
		"op", op, "err", err, "wait_at_most", l.twinWait().String())
	assigns := l.assignsAtBegin
	if !l.open {
		assigns = l.assigns
	}
	l.twin = &twinCheck{op: op, why: why, err: err, since: time.Now(), assigns: assigns}
	// The fenced transaction cannot commit: its changes to the handler's
	// state are undone now, before a revoke during the wait forgets the
	// state of partitions that go (undone after it, they would come back).
	if l.open {
		l.handlerAborted()
	}
}

// settleTwin polls the consumer until the coordinator's verdict on the
// pending fence is in, then recovers or stops. Messages polled meanwhile
// are dropped: the rewind reads them again. Rebalances are served as
// always (nothing is open to end).
func (l *Loop) settleTwin(ctx context.Context) {
	w := l.twin
	for ctx.Err() == nil && l.fatal == nil && l.assigns == w.assigns && time.Since(w.since) < l.twinWait() {
		l.obs.Alive()
		switch ev := l.consumer.Poll(100).(type) {
		case *kafka.Stats:
			l.obs.Statistics(kindConsumer, ev.String())
		case kafka.Error:
			l.consumerError(ev) // FENCED_INSTANCE_ID ends the loop there
		case *kafka.Message:
			// Dropped; its partition is rewound with the transaction's,
			// or the next commit would skip it.
			if tp, ok := l.admissible(ev); ok {
				l.include(tp, int64(ev.TopicPartition.Offset))
			}
		}
	}
	if ctx.Err() != nil || l.fatal != nil {
		return
	}
	l.twin = nil
	verdict := "the consumer rejoined its group under this group.instance.id"
	if l.assigns == w.assigns {
		verdict = fmt.Sprintf("the group coordinator refused no heartbeat in %s", time.Since(w.since).Round(time.Millisecond))
	}
	// A held call is no fence: nothing another instance did is
	// answered, so it does not count against the bound on recoveries
	// (an abort after each of many lost assignments is no ping-pong).
	held := errors.Is(w.err, errEpochBump)
	if !held && !l.mayRecover() {
		l.fatal = fmt.Errorf("%w: %s: after %s, %d recoveries within %s, giving up: %w", ErrFatal, w.op, w.why, maxRecoveries, recoveryWindow, w.err)
		return
	}
	l.log.Warn("no other instance holds this group.instance.id ("+verdict+"); starting a new producer and rewinding to the committed offsets",
		"op", w.op, "recoveries_in_window", len(l.recoveries))
	// A held abort's transaction did not commit, and the handler undid
	// it: its state needs no reload. A fence's or a held re-init's
	// outcome is unknown.
	l.renew(ctx, w.op+" (recovered)", false, !held || !w.abort)
}

// errEpochBump is the reason a call waits for the coordinator's verdict
// before it is made: it may bump the producer epoch.
var errEpochBump = errors.New("the call may bump the producer epoch, which fences whichever process holds this transactional.id now")

// Two calls bump the producer epoch of this transactional.id, and so
// fence whichever process holds it now: a new producer's
// InitTransactions, and an abort of a transaction whose records timed
// out, which librdkafka ends with InitProducerId under the current epoch
// (KIP-360). The broker takes the second as a retry of this instance's
// own epoch bump and fences the producer that replaced it. Seen after a
// freeze past the transaction timeout: the queued records time out on
// thaw, relay aborts, and the live twin that took this instance's place
// was fenced and stopped while the thawed process went on. So when the
// group may have moved on without this instance (zombie), a static member
// makes neither call before the coordinator's verdict; after it, a new
// producer settles what the old one left open.

// heldForVerdict reports whether op, a call that may bump the producer
// epoch, is held back for the group coordinator's verdict: while one is
// awaited, every such call is (the verdict's recovery settles the
// transaction); otherwise when the group may have moved on, and the wait
// starts. abort says op is an abort.
func (l *Loop) heldForVerdict(op string, abort bool) bool {
	if l.twin != nil {
		return true
	}
	if !l.set.StaticMember || l.fatal != nil {
		return false
	}
	why := l.zombie()
	if why == "" {
		return false
	}
	l.awaitTwin(op, why, errEpochBump)
	l.twin.abort = abort
	return true
}

// fencedInstance is the consumer's fatal error when another process joined
// the group with this group.instance.id.
func fencedInstance(e kafka.Error) bool { return e.IsFatal() && e.Code() == kafka.ErrFencedInstanceID }

// release gives up every partition after the consumer was refused its
// group.instance.id, as a revoke would: the open transaction is left to
// the next producer with this transactional id, which aborts it, so the
// handler undoes its changes, and forgets the partitions' state, which
// the next owner — this process with a new consumer, or another — reads
// again from the state topic.
func (l *Loop) release() {
	if l.open {
		l.handlerAborted()
	}
	parts := make([]kafka.TopicPartition, 0, len(l.assigned))
	for k := range l.assigned {
		parts = append(parts, k.at(0))
		delete(l.assigned, k)
	}
	l.paused = map[tpKey]time.Time{}
	if pl, ok := l.handler.(PartitionListener); ok && len(parts) > 0 {
		pl.OnRevoked(numbers(parts))
	}
	l.tellOwned()
	l.obs.Assigned(0)
}
