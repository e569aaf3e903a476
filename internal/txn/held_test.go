package txn

// Review findings on holding back the calls that may bump the producer
// epoch while a verdict is awaited (twin.go): a key-ordering handler's
// records handed back (Floors) went on in the held transaction, aborted
// it for real on the old producer, or committed it; and a refusal of the
// group.instance.id at a revoke undid the transaction after the handler
// forgot the partition.

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// freezingParker freezes the loop when the "release" record is handled.
type freezingParker struct {
	*parker
	l **Loop
}

func (f *freezingParker) Handle(ctx context.Context, r *Record) ([]Output, error) {
	if string(r.Value) == "release" {
		(*f.l).freeze.gap.Store(int64(time.Second))
	}
	return f.parker.Handle(ctx, r)
}

// heldRun runs a static member whose handler parks records and is frozen
// past its session when it handles "release": the handler made by mk, on
// a first producer that fails as given, then the consumer's script then.
// It returns the first producer.
func heldRun(t *testing.T, maxRecords int, mk func(l **Loop, ph *parker) Handler, first *fakeProducer, script func(c *fakeConsumer) []kafka.Event) *fakeProducer {
	t.Helper()
	h := newHarness(t, first, newFakeProducer())
	h.set.TxnTimeout = time.Nanosecond
	h.set.SessionTimeout = 30 * time.Millisecond
	h.set.OpTimeout = 20 * time.Millisecond
	h.set.StaticMember = true
	if maxRecords > 0 {
		h.set.MaxRecords = maxRecords
	}
	var l *Loop
	ph := &parker{parked: map[int32][]int64{}}
	h.handler = mk(&l, ph)
	c := h.c
	c.committed[0] = 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.script = script(c)
	c.onIdle = cancel
	l = New(h.set, c, h.factory, h.handler, discard(), h.obs)
	err := l.Run(ctx)
	t.Logf("Run = %v; calls %v; made %d; handled %v; sent %v", err, first.calls, h.made, ph.handled, first.sentOffsets)
	return first
}

// After a freeze, two due records of a Floors handler both fail to produce
// (_STATE: the queued records timed out). The first abort is held for the
// verdict; the second must be too.
func TestHeldWaitHoldsEveryLaterAbort(t *testing.T) {
	first := newFakeProducer()
	stateErr := fakeErr{code: kafka.ErrState}
	first.produceErrs = []error{nil, stateErr, stateErr}
	heldRun(t, 0, func(l **Loop, ph *parker) Handler { return &freezingParker{parker: ph, l: l} }, first,
		func(c *fakeConsumer) []kafka.Event {
			return []kafka.Event{c.assign(0), valued(c.msg(0, 1), "park"), valued(c.msg(0, 2), "park"), valued(c.msg(0, 3), "release"), twinErr}
		})
	if slices.Contains(first.calls, "abort") {
		t.Errorf("AbortTransaction called on the old producer during the wait for the verdict (may bump the epoch and fence the twin): %v", first.calls)
	}
}

// Same, but the first due record fails in the handler and the second is
// applied: the loop went on handling records in the held transaction and
// committed it when due.
func TestHeldTransactionIsNeverCommitted(t *testing.T) {
	fail := true
	first := heldRun(t, 4, func(l **Loop, ph *parker) Handler {
		return &failingDue{freezingParker: &freezingParker{parker: ph, l: l}, fail: &fail, failAt: 1}
	}, newFakeProducer(), func(c *fakeConsumer) []kafka.Event {
		return []kafka.Event{c.assign(0), valued(c.msg(0, 1), "park"), valued(c.msg(0, 2), "park"), valued(c.msg(0, 3), "release"), sleepEvent(200 * time.Millisecond)}
	})
	if slices.Contains(first.calls, "commit") {
		t.Errorf("the held transaction was committed on the old producer: calls %v, offsets %v", first.calls, first.sentOffsets)
	}
}

type failingDue struct {
	*freezingParker
	fail   *bool
	failAt int64
}

func (f *failingDue) Handle(ctx context.Context, r *Record) ([]Output, error) {
	if r.Offset == f.failAt && *f.fail && slices.Contains(f.due, r) {
		*f.fail = false
		f.handled = append(f.handled, "fail-1")
		return nil, errHandler
	}
	return f.freezingParker.Handle(ctx, r)
}

var errHandler = fakeErrH("boom")

type fakeErrH string

func (e fakeErrH) Error() string { return string(e) }

// undoingParker undoes the parks of the open transaction on OnAbort, as
// the pipeline's key ordering (keyorder.Set.Abort) does.
type undoingParker struct {
	*failingDue
	inTxn []int64
}

func (u *undoingParker) Handle(ctx context.Context, r *Record) ([]Output, error) {
	if string(r.Value) == "park" && !slices.Contains(u.due, r) {
		u.inTxn = append(u.inTxn, r.Offset)
	}
	return u.failingDue.Handle(ctx, r)
}
func (u *undoingParker) OnCommit() { u.inTxn = nil }
func (u *undoingParker) OnAbort() {
	p := u.parker
	p.parked[0] = slices.DeleteFunc(p.parked[0], func(o int64) bool { return slices.Contains(u.inTxn, o) })
	u.inTxn = nil
}

// Nor are the parked records' offsets of a held transaction, which the
// handler undid, committed past them.
func TestHeldTransactionCommitsNoParkedOffset(t *testing.T) {
	fail := true
	first := heldRun(t, 4, func(l **Loop, ph *parker) Handler {
		return &undoingParker{failingDue: &failingDue{freezingParker: &freezingParker{parker: ph, l: l}, fail: &fail, failAt: 0}}
	}, newFakeProducer(), func(c *fakeConsumer) []kafka.Event {
		return []kafka.Event{c.assign(0), valued(c.msg(0, 0), "park"), valued(c.msg(0, 1), "park"), valued(c.msg(0, 2), "release"), sleepEvent(200 * time.Millisecond)}
	})
	for _, offs := range first.sentOffsets {
		if o := offsetsOf(offs)[0]; o > 0 {
			t.Errorf("committed src[0]@%d: record 0 (parked, never written) is skipped", o)
		}
	}
}

// The revoke's commit is refused with FENCED_INSTANCE_ID: the open
// transaction's changes must be undone before OnRevoked forgets the
// partition (else they come back, see awaitTwin).
func TestRefusedInstanceAtARevokeUndoesFirst(t *testing.T) {
	first := newFakeProducer()
	first.commitErrs = []error{fakeErr{code: kafka.ErrFencedInstanceID, abort: true}}
	h := newHarness(t, first)
	h.set.StaticMember = true
	j := &journal{}
	h.handler = j
	c := h.c
	err := h.run(c.assign(0), c.msg(0, 0), c.revoke(0))
	t.Logf("Run = %v, journal %v", err, j.ev)
	ia, ir := slices.Index(j.ev, "abort"), slices.Index(j.ev, "revoked[0]")
	if ia < 0 || ia > ir {
		t.Errorf("journal %v: OnAbort after OnRevoked", j.ev)
	}
}
