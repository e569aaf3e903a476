package pipeline

import (
	"testing"
	"time"

	"relay/internal/keyorder"
)

// parkThree: A1 (10) in the tier, A2 (11), A3 (13), A4 (15) parked; B at
// 12, 14. Committed; the next owner restores A's state and reads again
// from the commit.
func parkThree(t *testing.T) (n *Machine, now *time.Time) {
	t.Helper()
	m, a, _ := parking(t, 100)
	failHead(t, m, a)
	handle(t, m, rec("orders", 0, 11, "A"))
	handle(t, m, rec("orders", 0, 12, "B"))
	handle(t, m, rec("orders", 0, 13, "A"))
	handle(t, m, rec("orders", 0, 14, "B"))
	state := handle(t, m, rec("orders", 0, 15, "A"))[0]
	off, md := m.Floor(ordersP0, 16)
	m.OnCommit()
	n, _, now = parking(t, 100)
	if err := n.keys.Restore(map[string][]byte{string(state.Key): state.Value}); err != nil {
		t.Fatal(err)
	}
	if err := n.Resume(ordersP0, off, md); err != nil {
		t.Fatal(err)
	}
	return n, now
}

// The consumer fetched 11..15 before retention moved the log start to
// 14, and hands them to a slow loop one by one. While records of the
// partition still arrive, the log start finds nothing gone: 13 is still
// in the consumer's queue, and taking it for lost would queue it, when it
// arrives, as a new record behind A4 (15). It arrives, is read again in
// its place, and nothing is lost.
func TestLogStartWaitsWhileRecordsArrive(t *testing.T) {
	n, now := parkThree(t)
	n.SetLogStart(func(string, int32) (int64, bool) { return 14, true })
	look := func(what string) {
		t.Helper()
		*now = now.Add(1100 * time.Millisecond)
		for _, r := range n.Due() {
			if r.Value == nil {
				t.Fatalf("%s: a carrier while records still arrive", what)
			}
		}
	}
	look("first look")
	handle(t, n, rec("orders", 0, 11, "A")) // from the consumer's queue
	look("after 11")
	handle(t, n, rec("orders", 0, 12, "B"))
	look("after 12")
	if outs := handle(t, n, rec("orders", 0, 13, "A")); len(outs) != 0 {
		t.Fatalf("13 read again: %v, want it kept, parked in its place", topics(outs))
	}
	look("after 13")
	look("with nothing read")
	if got := n.ParkStats().Lost; got != 0 {
		t.Fatalf("%d lost", got)
	}
	if off, md := n.Floor(ordersP0, 16); off != 11 {
		t.Fatalf("floor %d %q, want 11 (A2, A3, A4 parked)", off, md)
	}
}

// A partition read again from a commit without a parked set below a
// parked record (an operator's commit without metadata, an offset reset
// back, expired offsets) commits {11; Hi 13}, its parked record at 20
// not read yet. Read again from that commit, the floor must not claim
// 13..19, never handled since, as settled (by raising its handled
// position to 20's): the next reader would skip them.
func TestFloorNeverClaimsUnreadRecordsSettled(t *testing.T) {
	m, a, _ := parking(t, 100)
	failHead(t, m, a)
	handle(t, m, rec("orders", 0, 11, "A"))
	for o := int64(12); o < 20; o++ {
		handle(t, m, rec("orders", 0, o, "B"))
	}
	state := handle(t, m, rec("orders", 0, 20, "A"))[0]
	m.OnCommit()
	restore := func() *Machine {
		n, _, _ := parking(t, 100)
		if err := n.keys.Restore(map[string][]byte{string(state.Key): state.Value}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Operator: commit at 11 without metadata (RUNBOOK), relay restarted.
	n := restore()
	if err := n.Resume(ordersP0, 11, ""); err != nil {
		t.Fatal(err)
	}
	handle(t, n, rec("orders", 0, 11, "A"))
	handle(t, n, rec("orders", 0, 12, "B"))
	off, md := n.Floor(ordersP0, 13)
	n.OnCommit()
	t.Logf("first commit: %d %q", off, md)
	// The next transaction aborts (or the instance restarts): read again.
	n2 := restore()
	if err := n2.Resume(ordersP0, off, md); err != nil {
		t.Fatal(err)
	}
	handle(t, n2, rec("orders", 0, 11, "A"))
	off2, md2 := n2.Floor(ordersP0, 12)
	n2.OnCommit()
	p, _, _ := keyorder.Decode(off2, md2)
	t.Logf("second commit: %d %+v", off2, p)
	for o := int64(13); o < 20; o++ {
		if p.Settled(o) {
			t.Errorf("offset %d never handled since the reset, committed as settled", o)
		}
	}
	n3 := restore()
	if err := n3.Resume(ordersP0, off2, md2); err != nil {
		t.Fatal(err)
	}
	if outs := handle(t, n3, rec("orders", 0, 15, "B")); len(outs) == 0 {
		t.Errorf("15 skipped by the next reader: lost")
	}
}
