package txn

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

var errQueueFull = fakeErr{code: kafka.ErrQueueFull}

func full(n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = errQueueFull
	}
	return out
}

// A full producer queue is waited out by trying again, never by a flush
// (which would hold the loop for its whole timeout each time).
func TestFullQueueIsWaitedOut(t *testing.T) {
	h := newHarness(t)
	p := h.prods[0]
	p.produceErrs = full(3)
	c := h.c
	if err := h.run(c.assign(0, 1), c.msg(0, 5), c.msg(1, 3)); err != nil {
		t.Fatal(err)
	}
	if len(p.produced) != 2 || h.obs.aborted != 0 || h.obs.committed != 1 {
		t.Fatalf("produced %d, aborted %d, committed %d: want both records in one committed transaction",
			len(p.produced), h.obs.aborted, h.obs.committed)
	}
	if got := offsetsOf(p.sentOffsets[0]); got[0] != 6 || got[1] != 4 {
		t.Fatalf("committed %v, want 0:6 1:4", got)
	}
	if slices.Contains(p.calls, "flush") {
		t.Fatalf("calls %v: a full queue was flushed", p.calls)
	}
}

// A queue still full after OpTimeout aborts the transaction: the record in
// hand and every other partition of the transaction are read again, and
// nothing of the transaction is committed.
func TestQueueFullPastOpTimeoutAbortsAndRewinds(t *testing.T) {
	h := newHarness(t)
	h.set.OpTimeout = 20 * time.Millisecond
	p := h.prods[0]
	p.produceErrs = append([]error{nil}, full(1_000_000)...)
	c := h.c
	c.committed[0], c.committed[1] = 5, 3
	if err := h.run(c.assign(0, 1), c.msg(0, 5), c.msg(1, 3)); err != nil {
		t.Fatal(err)
	}
	if h.obs.aborted == 0 {
		t.Fatal("no abort")
	}
	if got := offsetsOf(c.seeks); got[0] != 5 || got[1] != 3 {
		t.Fatalf("seeks %v, want 0:5 1:3", got)
	}
	for _, offs := range p.sentOffsets {
		if got := offsetsOf(offs); got[0] > 5 || got[1] > 3 {
			t.Fatalf("committed %v past the records that were not written", got)
		}
	}
}

// A fence while waiting for room ends the wait at once: the fence is
// handled as at any other produce, nothing is committed.
func TestFenceWhileWaitingForRoom(t *testing.T) {
	h := newHarness(t)
	p := h.prods[0]
	p.produceErrs = append(full(2), errFenced)
	c := h.c
	err := h.run(c.assign(0), c.msg(0, 5))
	if !errors.Is(err, ErrFatal) {
		t.Fatalf("Run = %v, want the fence to stop the loop (ErrFatal)", err)
	}
	if len(p.sentOffsets) != 0 || h.obs.committed != 0 {
		t.Fatalf("committed after a fence: %v", p.sentOffsets)
	}
}
