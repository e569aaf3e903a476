package txn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Regression: after a broker outage longer than transaction.timeout.ms the
// coordinator had aborted the open transaction and bumped the epoch; the
// next call answered _FENCED and relay stopped as if it were a zombie. A
// fence of a transaction older than the timeout is the coordinator's: it is
// recovered from with a new producer and a rewind.
func TestFenceOfExpiredTransactionIsRecovered(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{errRetriable, errFenced}
	h := newHarness(t, first, second)
	h.set.TxnTimeout = time.Nanosecond
	c := h.c
	c.committed[0] = 7
	if err := h.run(c.assign(0), c.msg(0, 7), c.msg(0, 8)); err != nil {
		t.Fatalf("fence of an expired transaction stopped relay: %v", err)
	}
	if h.made != 2 || !first.closed {
		t.Fatalf("made %d producers (first closed: %v), want a new one", h.made, first.closed)
	}
	if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{0: 7}) {
		t.Fatalf("seeks %v, want partition 0 back to the committed 7", got)
	}
}

// A fence of a young transaction is another instance's, even right after
// broker errors (a zombie was often cut off before it came back): relay
// stops, and names the likely cause.
func TestFenceOfYoungTransactionStops(t *testing.T) {
	first := newFakeProducer()
	first.commitErrs = []error{errRetriable, errFenced}
	h := newHarness(t, first)
	h.set.TxnTimeout = time.Hour
	c := h.c
	err := h.run(c.assign(0), c.msg(0, 0))
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "RELAY_TRANSACTIONAL_ID") {
		t.Fatalf("Run = %v, want ErrFatal naming RELAY_TRANSACTIONAL_ID", err)
	}
	if h.made != 1 {
		t.Fatalf("made %d producers, want no replacement", h.made)
	}
}

// Two instances sharing a transactional.id must not fence each other in
// turn for ever: commits in between or not, the fourth recovery within the
// window stops relay.
func TestRepeatedFencesStop(t *testing.T) {
	var prods []*fakeProducer
	for range maxRecoveries + 1 {
		p := newFakeProducer()
		p.commitErrs = []error{nil, errFenced} // one commit, then fenced
		prods = append(prods, p)
	}
	h := newHarness(t, prods...)
	h.set.MaxRecords = 1
	h.set.TxnTimeout = time.Nanosecond
	c := h.c
	script := []kafka.Event{c.assign(0)}
	for i := range 2 * (maxRecoveries + 1) {
		script = append(script, c.msg(0, int64(i)))
	}
	err := h.run(script...)
	if !errors.Is(err, ErrFatal) {
		t.Fatalf("Run = %v after %d fences, want ErrFatal", err, maxRecoveries+1)
	}
}

// Review finding: the coordinator starts a transaction's clock at its
// first AddPartitionsToTxn, not at BeginTransaction. A handler that ran
// past transaction.timeout.ms before the first produce (a stuck hook, a
// frozen process) made a fence that a live instance sharing the id caused
// look like the coordinator's: relay recovered, and its InitTransactions
// fenced the live instance. The age counts from the first produce.
func TestFenceAfterAStallBeforeTheFirstProduceStops(t *testing.T) {
	first := newFakeProducer()
	first.commitErrs = []error{errFenced}
	h := newHarness(t, first)
	h.set.TxnTimeout = 30 * time.Millisecond
	h.handler = HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
		time.Sleep(50 * time.Millisecond) // past the timeout, before the first produce
		return []Output{{Topic: "out", Partition: r.Partition}}, nil
	})
	c := h.c
	err := h.run(c.assign(0), c.msg(0, 0))
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "RELAY_TRANSACTIONAL_ID") {
		t.Fatalf("Run = %v, want ErrFatal: the coordinator never heard of the transaction, so the fence is another instance's", err)
	}
	if h.made != 1 {
		t.Fatalf("made %d producers, want no replacement (it would fence the live instance)", h.made)
	}
}

// The other order: the first produce, then a stall past the transaction
// timeout. A slow handler or a slow commit keeps the group membership
// (librdkafka heartbeats from its own thread), so no replacement can own
// the partitions: the fence is the coordinator's, and relay recovers —
// with the session timeout shorter than the transaction timeout, as
// relay's defaults have it (45 s and at least 60 s).
func TestFenceAfterASlowRoundIsRecovered(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{errFenced}
	h := newHarness(t, first, second)
	// The freeze watch ticks every session.timeout.ms/10: a session long
	// enough that no scheduling delay of a loaded machine (51 ms seen with
	// a 45 ms session) looks like a freeze.
	h.set.TxnTimeout = 1200 * time.Millisecond
	h.set.SessionTimeout = time.Second
	h.set.MaxPollInterval = time.Hour
	h.handler = HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
		if r.Offset == 1 {
			time.Sleep(1300 * time.Millisecond) // a slow hook, past both
		}
		return []Output{{Topic: "out", Partition: r.Partition}}, nil
	})
	c := h.c
	if err := h.run(c.assign(0), c.msg(0, 0), c.msg(0, 1)); err != nil {
		t.Fatalf("Run = %v, want a recovery from the coordinator's fence", err)
	}
	if h.made != 2 {
		t.Fatalf("made %d producers, want a new one", h.made)
	}
}

// A process frozen past the session timeout (SIGSTOP, a paused VM) has
// lost its membership: a replacement with its transactional id may be
// live, and a dynamic member, which cannot ask (see twin.go), stops rather
// than fence it back, however old the transaction. (The freeze is told by a ticker of its own, which a freeze
// stops and a busy loop does not: here it is told one.)
func TestFenceAfterAFreezePastTheSessionStops(t *testing.T) {
	first := newFakeProducer()
	first.commitErrs = []error{errFenced}
	h := newHarness(t, first)
	h.set.TxnTimeout = time.Nanosecond
	h.set.SessionTimeout = 30 * time.Millisecond
	var l *Loop
	h.handler = HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
		l.freeze.gap.Store(int64(time.Second)) // frozen for a second
		return []Output{{Topic: "out", Partition: r.Partition}}, nil
	})
	c := h.c
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.script, c.onIdle = []kafka.Event{c.assign(0), c.msg(0, 0)}, cancel
	l = New(h.set, c, h.factory, h.handler, discard(), h.obs)
	err := l.Run(ctx)
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "frozen") || !strings.Contains(err.Error(), "session.timeout.ms") {
		t.Fatalf("Run = %v, want ErrFatal naming the freeze past session.timeout.ms", err)
	}
	if h.made != 1 {
		t.Fatalf("made %d producers, want no replacement", h.made)
	}
}

// A loop that has not polled for max.poll.interval.ms has left the group
// (librdkafka leaves it for the member): the same, for a dynamic member.
func TestFenceAfterNoPollPastTheIntervalStops(t *testing.T) {
	first := newFakeProducer()
	first.commitErrs = []error{errFenced}
	h := newHarness(t, first)
	h.set.TxnTimeout = time.Nanosecond
	h.set.MaxPollInterval = 30 * time.Millisecond
	h.handler = HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
		time.Sleep(50 * time.Millisecond)
		return []Output{{Topic: "out", Partition: r.Partition}}, nil
	})
	c := h.c
	err := h.run(c.assign(0), c.msg(0, 0))
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "max.poll.interval.ms") {
		t.Fatalf("Run = %v, want ErrFatal naming max.poll.interval.ms", err)
	}
}

// The freeze watch: the longest gap between its ticks, beyond one tick.
func TestFreezeWatchMeasuresGaps(t *testing.T) {
	w := &freezeWatch{every: 10 * time.Millisecond}
	t0 := time.Now()
	w.last.Store(t0.UnixNano())
	w.tick(t0.Add(10 * time.Millisecond))
	w.tick(t0.Add(20 * time.Millisecond))
	if f := w.frozen(t0.Add(25 * time.Millisecond)); f != 0 {
		t.Fatalf("frozen %s with ticks on time", f)
	}
	w.tick(t0.Add(5 * time.Second)) // a freeze of about 5 s
	if f := w.frozen(t0.Add(5*time.Second + time.Millisecond)); f < 4*time.Second {
		t.Fatalf("frozen %s after a 5 s gap", f)
	}
	w.reset()
	if f := w.frozen(t0.Add(5*time.Second + time.Millisecond)); f != 0 {
		t.Fatalf("frozen %s after reset", f)
	}
	// A freeze no tick has seen yet counts too.
	if f := w.frozen(t0.Add(9 * time.Second)); f < 3*time.Second {
		t.Fatalf("frozen %s 4 s after the last tick", f)
	}
}

// Likewise when the consumer of a dynamic member reports its assignment
// lost.
func TestFenceWithTheAssignmentLostStops(t *testing.T) {
	first := newFakeProducer()
	first.abortErrs = []error{errFenced} // a lost assignment aborts
	h := newHarness(t, first)
	h.set.TxnTimeout = time.Nanosecond
	c := h.c
	err := h.run(c.assign(0), c.msg(0, 0), lostEvent{})
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "lost its assignment") {
		t.Fatalf("Run = %v, want ErrFatal naming the lost assignment", err)
	}
	if h.made != 1 {
		t.Fatalf("made %d producers, want no replacement", h.made)
	}
}

// Review finding: the errors recovered with a new producer
// (INVALID_TXN_STATE, OUT_OF_ORDER_SEQUENCE_NUMBER) were recovered from
// after the group had moved on too; a dynamic member's new producer would
// fence an instance that took its place. It stops, as after a fence.
func TestRecoverableFatalWithTheAssignmentLostStops(t *testing.T) {
	for _, code := range []kafka.ErrorCode{kafka.ErrOutOfOrderSequenceNumber, kafka.ErrInvalidTxnState} {
		first := newFakeProducer()
		first.abortErrs = []error{fakeErr{code: code, fatalF: true}} // a lost assignment aborts
		h := newHarness(t, first, newFakeProducer())
		c := h.c
		err := h.run(c.assign(0), c.msg(0, 0), lostEvent{})
		if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "lost its assignment") {
			t.Fatalf("%s: Run = %v, want ErrFatal naming the lost assignment", code, err)
		}
		if h.made != 1 {
			t.Fatalf("%s: made %d producers, want no replacement", code, h.made)
		}
	}
}

// Review finding: librdkafka reports a producer's latest fatal error to a
// transactional call, so a fence followed by a late sequence error read as
// OUT_OF_ORDER_SEQUENCE_NUMBER and was recovered from with a new producer,
// fencing the instance that fenced this one. The first fatal error decides.
func TestAFenceReportedAsASequenceErrorStops(t *testing.T) {
	first := newFakeProducer()
	first.commitErrs = []error{fakeErr{code: kafka.ErrOutOfOrderSequenceNumber, fatalF: true}}
	first.firstFatal = errFenced
	h := newHarness(t, first, newFakeProducer())
	c := h.c
	err := h.run(c.assign(0), c.msg(0, 0))
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "RELAY_TRANSACTIONAL_ID") {
		t.Fatalf("Run = %v, want ErrFatal as after a fence", err)
	}
	if h.made != 1 {
		t.Fatalf("made %d producers, want no replacement", h.made)
	}
}

// frozenRun runs the loop as TestFenceAfterAFreezePastTheSessionStops
// does — a static member frozen past the session timeout in its first
// transaction, whose commit is fenced — with then as what the consumer
// gives after the fence.
func frozenRun(t *testing.T, static bool, then ...kafka.Event) (*harness, error) {
	t.Helper()
	return frozenRunFailing(t, static, errFenced, then...)
}

// frozenRunFailing is frozenRun with commitErr as the commit's error.
func frozenRunFailing(t *testing.T, static bool, commitErr error, then ...kafka.Event) (*harness, error) {
	t.Helper()
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{commitErr}
	h := newHarness(t, first, second)
	h.set.TxnTimeout = time.Nanosecond
	h.set.SessionTimeout = 30 * time.Millisecond
	h.set.OpTimeout = 20 * time.Millisecond
	h.set.StaticMember = static
	h.set.MaxRecords = 1 // the commit comes after the record
	var l *Loop
	frozen := false
	h.handler = HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
		if !frozen {
			frozen = true
			l.freeze.gap.Store(int64(time.Second)) // frozen for a second
		}
		return []Output{{Topic: "out", Partition: r.Partition}}, nil
	})
	c := h.c
	c.committed[0] = 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.script = append([]kafka.Event{c.assign(0), c.msg(0, 0)}, then...)
	c.onIdle = func() {
		// Past the verdict's bound, so a wait with no answer ends too.
		if l.twin == nil {
			cancel()
		}
	}
	l = New(h.set, c, h.factory, h.handler, discard(), h.obs)
	return h, l.Run(ctx)
}

// Issue: a process frozen past the session timeout exited 1 ("stops
// rather than fence it back") although no other instance had its
// transactional id. A static member whose group takes it back (a new
// assignment after the fence) has no twin: relay starts a new producer
// and rewinds, as after any coordinator fence.
func TestFenceAfterAFreezeWithoutATwinIsRecovered(t *testing.T) {
	h, err := frozenRun(t, true, h0assign(), h0msg(0))
	if err != nil {
		t.Fatalf("Run = %v, want a recovery: the consumer rejoined under its group.instance.id, so no twin holds it", err)
	}
	if h.made != 2 {
		t.Fatalf("made %d producers, want a new one", h.made)
	}
	if got := offsetsOf(h.c.seeks); !mapsEqual(got, map[int32]int64{0: 0}) {
		t.Fatalf("seeks %v, want partition 0 back to the committed 0", got)
	}
}

// The same when the coordinator refuses no heartbeat within the bound
// (the member was never expired): no twin holds the id.
func TestFenceAfterAFreezeWithNoRefusalIsRecovered(t *testing.T) {
	h, err := frozenRun(t, true, sleepEvent(80*time.Millisecond))
	if err != nil || h.made != 2 {
		t.Fatalf("Run = %v, made %d producers; want a recovery with a new producer after the bound", err, h.made)
	}
}

// A twin joined the group with this group.instance.id while relay was
// frozen: the coordinator refuses relay's consumer (FENCED_INSTANCE_ID).
// The loop returns ErrInstanceFenced (its caller tells a live twin from a
// stale holder) without a new producer, which would fence the twin's.
func TestFenceAfterAFreezeWithATwinStops(t *testing.T) {
	twin := kafka.NewError(kafka.ErrFencedInstanceID, "Fatal consumer error: Broker: Static consumer fenced by other consumer with same group.instance.id", true)
	h, err := frozenRun(t, true, twin)
	if !errors.Is(err, ErrFatal) || !errors.Is(err, ErrInstanceFenced) {
		t.Fatalf("Run = %v, want ErrFatal and ErrInstanceFenced", err)
	}
	if h.made != 1 {
		t.Fatalf("made %d producers, want no replacement (it would fence the twin)", h.made)
	}
}

// A dynamic member (RELAY_STATIC_MEMBERSHIP=false) cannot tell a twin, and
// stops, however its group answers.
func TestFenceAfterAFreezeOfADynamicMemberStops(t *testing.T) {
	h, err := frozenRun(t, false, h0assign())
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "frozen") {
		t.Fatalf("Run = %v, want ErrFatal naming the freeze", err)
	}
	if h.made != 1 {
		t.Fatalf("made %d producers, want no replacement", h.made)
	}
}

// h0assign and h0msg are events of the harness's source topic.
func h0assign() kafka.Event { return (&fakeConsumer{topic: "src"}).assign(0) }

func h0msg(off int64) kafka.Event { return (&fakeConsumer{topic: "src"}).msg(0, off) }

// Issue: in a rolling broker restart, a coordinator that aborted relay's
// transaction (older than transaction.timeout.ms) bumped the epoch; relay
// had lost its assignment meanwhile, took the fence for a twin's and
// exited 1. A static member given its partitions back has no twin, and
// recovers.
func TestFenceWithTheAssignmentLostOfAStaticMemberIsRecovered(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.abortErrs = []error{errFenced} // a lost assignment aborts
	h := newHarness(t, first, second)
	h.set.TxnTimeout = time.Nanosecond
	h.set.MaxRecords = 1
	h.set.StaticMember = true
	c := h.c
	if err := h.run(c.assign(0), lostEvent{}, c.msg(0, 0), c.assign(0), c.msg(0, 0)); err != nil {
		t.Fatalf("Run = %v, want a recovery: the group gave the partitions back", err)
	}
	if h.made != 2 {
		t.Fatalf("made %d producers, want a new one", h.made)
	}
}

// Review finding: records of a partition outside the fenced transaction,
// polled (and dropped) while relay waited for the coordinator's verdict,
// were skipped: the rewind sought only the transaction's partitions, and
// the next commit moved past them. Every partition a dropped record came
// from is rewound.
func TestRecordsPolledWhileWaitingForTheVerdictAreRewound(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{errFenced}
	h := newHarness(t, first, second)
	h.set.TxnTimeout = time.Nanosecond
	h.set.SessionTimeout = 30 * time.Millisecond
	h.set.OpTimeout = 20 * time.Millisecond
	h.set.StaticMember = true
	h.set.MaxRecords = 1
	var l *Loop
	frozen := false
	h.handler = HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
		if !frozen {
			frozen = true
			l.freeze.gap.Store(int64(time.Second))
		}
		return []Output{{Topic: "out", Partition: r.Partition}}, nil
	})
	c := h.c
	c.committed[0] = 0
	c.committed[1] = 5
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// p1's 5 and 6 arrive during the wait; 7 after the recovery.
	c.script = []kafka.Event{c.assign(0, 1), c.msg(0, 0), c.msg(1, 5), c.msg(1, 6), sleepEvent(80 * time.Millisecond), c.msg(1, 7)}
	c.onIdle = func() {
		if l.twin == nil {
			cancel()
		}
	}
	l = New(h.set, c, h.factory, h.handler, discard(), h.obs)
	err := l.Run(ctx)
	if err != nil || h.made != 2 {
		t.Fatalf("Run = %v, made %d producers; want a recovery", err, h.made)
	}
	if off, ok := offsetsOf(c.seeks)[1]; !ok || off != 5 {
		t.Fatalf("seeks %v: partition 1 not rewound to its committed 5; records 5 and 6, dropped while waiting, would be skipped", offsetsOf(c.seeks))
	}
}
