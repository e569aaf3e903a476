package pipeline

import (
	"testing"
	"time"

	"relay/internal/txn"
)

// parkTwo is A1 (orders/0/10) failed into the tier with A2 (11) and A3
// (13) parked behind it and B1 (12) processed, committed; then the next
// owner, with key A's state restored and partition 0 read again from the
// commit.
func parkTwo(t *testing.T) (n *Machine, now *time.Time, a1 txn.Output) {
	t.Helper()
	m, a, _ := parking(t, 100)
	a1 = failHead(t, m, a)
	handle(t, m, rec("orders", 0, 11, "A"))
	handle(t, m, rec("orders", 0, 12, "B"))
	state := handle(t, m, rec("orders", 0, 13, "A"))[0]
	off, md := m.Floor(ordersP0, 14)
	m.OnCommit()
	if off != 11 {
		t.Fatalf("floor %d, want 11", off)
	}
	n, _, now = parking(t, 100)
	if err := n.keys.Restore(map[string][]byte{string(state.Key): state.Value}); err != nil {
		t.Fatal(err)
	}
	if err := n.Resume(ordersP0, off, md); err != nil {
		t.Fatal(err)
	}
	return n, now, a1
}

// lostOf hands the machine what is due and returns the outputs of the
// carrier of partition 0, failing unless there is exactly one.
func lostOf(t *testing.T, m *Machine) []txn.Output {
	t.Helper()
	var carrier *txn.Record
	for _, r := range m.Due() {
		if r.Topic == "orders" && r.Partition == 0 && r.Value == nil {
			if carrier != nil {
				t.Fatal("two carriers for one partition")
			}
			carrier = r
		}
	}
	if carrier == nil {
		t.Fatal("no carrier of orders/0 due")
	}
	return handle(t, m, carrier)
}

// A parked record the read passes without seeing (retention or
// DeleteRecords trimmed it: the consumer's reset went to the log's new
// start) is lost: its key's state marks it so, the partition's floor
// passes it, and when the head settles the key goes on to the next
// parked record, which is handled at its turn.
func TestParkedRecordGoneIsPassedOver(t *testing.T) {
	n, now, a1 := parkTwo(t)
	a3 := rec("orders", 0, 13, "A")
	// 11 and 12 were deleted: the read starts at 13.
	if outs := handle(t, n, a3); len(outs) != 0 {
		t.Fatalf("A3 read again: %v", topics(outs))
	}
	outs := lostOf(t, n)
	if len(outs) != 1 {
		t.Fatalf("carrier: %v, want key A's state", topics(outs))
	}
	s := stateOf(t, outs[0])
	if s == nil || s.Next != 0 || len(s.Parked) != 2 || !s.Parked[0].Lost || s.Parked[0].Offset != 11 || s.Parked[1].Lost {
		t.Fatalf("state after the loss: %+v", s)
	}
	if off, _ := n.Floor(ordersP0, 14); off != 13 {
		t.Fatalf("floor %d, want 13 (A3 parked; 11 lost)", off)
	}
	n.OnCommit()
	if got := n.ParkStats().Lost; got != 1 {
		t.Fatalf("lost %d, want 1", got)
	}
	if d := n.Due(); len(d) != 0 {
		t.Fatalf("due after the carrier: %v", d)
	}
	*now = t0.Add(31 * time.Second)
	outs = handle(t, n, asRead(a1, 0))
	if len(outs) != 2 || outs[0].Topic != "orders.valid" {
		t.Fatalf("A1 at its turn: %v", topics(outs))
	}
	if s := stateOf(t, outs[1]); s == nil || s.Next != 2 || len(s.Parked) != 1 || s.Parked[0].Seq != 2 {
		t.Fatalf("after the head: %+v, want A3's turn (seq 2)", s)
	}
	due := n.Due()
	if len(due) != 1 || due[0] != a3 {
		t.Fatalf("due %v, want A3", due)
	}
	if outs := handle(t, n, a3); len(outs) != 2 || outs[0].Topic != "orders.valid" || outs[1].Value != nil {
		t.Fatalf("A3 at its turn: %v", topics(outs))
	}
	if off, md := n.Floor(ordersP0, 14); off != 14 || md != "" {
		t.Fatalf("floor %d %q, want 14", off, md)
	}
}

// A parked record at its key's turn that is gone lets the key go on at
// once: no head is left to settle.
func TestParkedRecordGoneAtItsTurn(t *testing.T) {
	n, now, a1 := parkTwo(t)
	*now = t0.Add(31 * time.Second)
	handle(t, n, asRead(a1, 0)) // A1 processed: A2's turn, but A2 is not read yet
	a3 := rec("orders", 0, 13, "A")
	handle(t, n, a3)
	outs := lostOf(t, n)
	if s := stateOf(t, outs[0]); s == nil || s.Next != 2 || len(s.Parked) != 1 || s.Parked[0].Offset != 13 {
		t.Fatalf("state after the loss: %+v, want A3's turn", s)
	}
	if due := n.Due(); len(due) != 1 || due[0] != a3 {
		t.Fatalf("due %v, want A3", due)
	}
}

// A partition whose log now starts above a parked record finds it gone
// without reading a record: the consumer's log start says so, at two
// looks a second apart.
func TestParkedRecordBelowTheLogStart(t *testing.T) {
	n, now, _ := parkTwo(t)
	start := int64(0)
	n.SetLogStart(func(topic string, partition int32) (int64, bool) {
		return start, topic == "orders" && partition == 0
	})
	if d := n.Due(); len(d) != 0 {
		t.Fatalf("due with the log starting at 0: %v", d)
	}
	start = 14
	*now = now.Add(2 * time.Second)
	if d := n.Due(); len(d) != 0 {
		t.Fatalf("due at the first look below the log start: %v", d)
	}
	*now = now.Add(2 * time.Second)
	outs := lostOf(t, n)
	if s := stateOf(t, outs[len(outs)-1]); s == nil || len(s.Parked) != 2 || !s.Parked[0].Lost || !s.Parked[1].Lost {
		t.Fatalf("state after the loss: %v %+v, want both lost", topics(outs), s)
	}
	// The carrier stood at 11; the commit read again said 11 and 13
	// parked up to 14: neither holds the floor back now.
	if off, md := n.Floor(ordersP0, 12); off != 14 || md != "" {
		t.Fatalf("floor %d %q, want 14", off, md)
	}
}

// States restored while the partition is being read (Reload, after a
// commit whose outcome was unknown) are read again too: a parked record
// of theirs that the read passes is lost.
func TestParkedRecordGoneRestoredLate(t *testing.T) {
	m, a, _ := parking(t, 100)
	failHead(t, m, a)
	state := handle(t, m, rec("orders", 0, 11, "A"))[0]
	off, md := m.Floor(ordersP0, 12)
	m.OnCommit()
	n, _, _ := parking(t, 100)
	if err := n.Resume(ordersP0, off, md); err != nil {
		t.Fatal(err)
	}
	handle(t, n, rec("orders", 0, 12, "B"))
	if err := n.keys.Restore(map[string][]byte{string(state.Key): state.Value}); err != nil {
		t.Fatal(err)
	}
	handle(t, n, rec("orders", 0, 13, "C"))
	if s := stateOf(t, lostOf(t, n)[0]); s == nil || !s.Parked[0].Lost {
		t.Fatalf("state %+v", s)
	}
}

// A parked record read again is not lost, nor is one parked now, nor one
// the read has not reached; an abort forgets what was found, and the
// partition read again finds it again.
func TestParkedRecordsReadAgainAreNotLost(t *testing.T) {
	n, _, _ := parkTwo(t)
	a2 := rec("orders", 0, 11, "A")
	handle(t, n, a2)
	handle(t, n, rec("orders", 0, 12, "B"))
	if d := n.Due(); len(d) != 0 {
		t.Fatalf("due: %v, want nothing (11 read again, 13 not reached)", d)
	}
	// A4, parked now, far above.
	handle(t, n, rec("orders", 0, 20, "A"))
	handle(t, n, rec("orders", 0, 21, "C"))
	outs := lostOf(t, n) // 13 passed unseen
	if s := stateOf(t, outs[0]); s == nil || len(s.Parked) != 3 || s.Parked[0].Lost || !s.Parked[1].Lost || s.Parked[2].Lost {
		t.Fatalf("state: %+v, want only 13 lost", s)
	}
	n.OnAbort()
	if off, md := n.Floor(ordersP0, 22); off != 11 {
		t.Fatalf("floor after the abort %d %q, want 11", off, md)
	}
	if d := n.Due(); len(d) != 0 {
		t.Fatalf("due after the abort, before the partition is read again: %v", d)
	}
}

// A parked record the consumer fetched before the log moved past it, and
// hands to the loop only after the log start said so, is read again, not
// lost: the log start finds a record gone only if it is still not read
// again at the next look, with no record of its partition read between.
func TestParkedRecordFetchedBeforeTheLogMoved(t *testing.T) {
	n, now, _ := parkTwo(t)
	n.SetLogStart(func(string, int32) (int64, bool) { return 14, true })
	if d := n.Due(); len(d) != 0 {
		t.Fatalf("due at the first look: %v", d)
	}
	handle(t, n, rec("orders", 0, 11, "A")) // A2, from the consumer's queue
	*now = now.Add(2 * time.Second)
	if d := n.Due(); len(d) != 0 {
		t.Fatalf("due at a look after a record was read: %v", d)
	}
	*now = now.Add(2 * time.Second)
	outs := lostOf(t, n)
	if s := stateOf(t, outs[0]); len(outs) != 1 || s == nil || s.Parked[0].Lost || !s.Parked[1].Lost {
		t.Fatalf("state %+v, want only 13 lost", s)
	}
}

// The group's offset reset past the parked records: the partition is
// read again from above them, so they are lost at once, without a record
// read, and the floor never goes back below that offset.
func TestParkedRecordsBelowTheOffsetReadAgainFrom(t *testing.T) {
	m, a, _ := parking(t, 100)
	failHead(t, m, a)
	handle(t, m, rec("orders", 0, 11, "A"))
	state := handle(t, m, rec("orders", 0, 13, "A"))[0]
	m.OnCommit()
	n, _, _ := parking(t, 100)
	if err := n.keys.Restore(map[string][]byte{string(state.Key): state.Value}); err != nil {
		t.Fatal(err)
	}
	if err := n.Resume(ordersP0, 20, ""); err != nil { // reset to 20
		t.Fatal(err)
	}
	if off, md := n.Floor(ordersP0, 12); off != 20 || md != "" {
		t.Fatalf("floor %d %q before the carrier, want 20", off, md)
	}
	outs := lostOf(t, n)
	if s := stateOf(t, outs[0]); len(outs) != 1 || s == nil || !s.Parked[0].Lost || !s.Parked[1].Lost {
		t.Fatalf("state %+v, want 11 and 13 lost", s)
	}
	if off, md := n.Floor(ordersP0, 12); off != 20 || md != "" {
		t.Fatalf("floor %d %q after the carrier, want 20", off, md)
	}
}

// The records settled between a lost parked record and the next one are
// not handled again: the parked set read again still says they are
// settled.
func TestSettledRecordsStaySettledPastALostOne(t *testing.T) {
	m, a, _ := parking(t, 100)
	failHead(t, m, a)
	handle(t, m, rec("orders", 0, 11, "A"))
	for _, o := range []int64{12, 13, 14} {
		handle(t, m, rec("orders", 0, o, "B"))
	}
	state := handle(t, m, rec("orders", 0, 15, "A"))[0]
	off, md := m.Floor(ordersP0, 16)
	m.OnCommit()
	n, _, _ := parking(t, 100)
	if err := n.keys.Restore(map[string][]byte{string(state.Key): state.Value}); err != nil {
		t.Fatal(err)
	}
	if err := n.Resume(ordersP0, off, md); err != nil {
		t.Fatal(err)
	}
	if outs := handle(t, n, rec("orders", 0, 12, "B")); len(outs) != 0 { // 11 deleted
		t.Fatalf("12 read again: %v", topics(outs))
	}
	lostOf(t, n)
	for _, o := range []int64{13, 14} {
		if outs := handle(t, n, rec("orders", 0, o, "B")); len(outs) != 0 {
			t.Fatalf("%d, settled before the commit, handled again after the carrier: %v", o, topics(outs))
		}
	}
	if off, _ := n.Floor(ordersP0, 16); off != 15 {
		t.Fatalf("floor %d, want 15 (A3 parked)", off)
	}
}

// One carrier writes one state record per key, however many of its
// records are lost.
func TestCarrierWritesOneStatePerKey(t *testing.T) {
	m, a, _ := parking(t, 1000)
	failHead(t, m, a)
	var state txn.Output
	for o := int64(11); o < 211; o++ {
		state = handle(t, m, rec("orders", 0, o, "A"))[0]
	}
	off, md := m.Floor(ordersP0, 211)
	m.OnCommit()
	n, _, _ := parking(t, 1000)
	if err := n.keys.Restore(map[string][]byte{string(state.Key): state.Value}); err != nil {
		t.Fatal(err)
	}
	if err := n.Resume(ordersP0, off, md); err != nil {
		t.Fatal(err)
	}
	handle(t, n, rec("orders", 0, 300, "C"))
	outs := lostOf(t, n)
	if s := stateOf(t, outs[0]); len(outs) != 1 || s == nil || len(s.Parked) != 200 || !s.Parked[199].Lost {
		t.Fatalf("%d outputs, want one state with 200 lost slots", len(outs))
	}
}
