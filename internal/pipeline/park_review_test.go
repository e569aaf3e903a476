package pipeline

import (
	"context"
	"testing"
	"time"

	"relay/internal/keyorder"
	"relay/internal/txn"
)

// committedBy is what txn.Loop.offsets commits for a partition whose
// records below next are handled: min(Floor's offset, next), with Floor's
// metadata unchanged.
// committedBy is what the loop commits for tp (see txn's offsets).
func committedBy(m *Machine, tp txn.TopicPartition, next int64) (int64, string) {
	return m.Floor(tp, next)
}

// A partition read again from a commit with a parked set, whose lowest
// parked record is handled first, has its next parked record above the
// transaction's next: Floor returns that record's offset (15) with a set
// based there, the loop commits min(15, 12) = 12 with the same metadata,
// and the set is read back shifted by three: 12 (settled) is handled
// again, 15 (parked, never handled) reads as settled and is skipped, and
// 27..29 are handled again. With key ordering off (or the key's state
// gone) nothing else keeps 15: it is lost.
func TestParkedSetCommittedBelowItsBase(t *testing.T) {
	now := t0
	m, _ := newMachine(&scriptedAdmitter{}, &now) // ordering switched off since the commit
	md, err := keyorder.Encode(keyorder.Parked{Offsets: []int64{11, 15}, Hi: 30})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Resume(ordersP0, 11, md); err != nil {
		t.Fatal(err)
	}
	if outs := handle(t, m, rec("orders", 0, 11, "A")); len(outs) != 1 || outs[0].Topic != "orders.valid" {
		t.Fatalf("11 (parked, ordering off now): %v", topics(outs))
	}
	off, md2 := committedBy(m, ordersP0, 12)
	p, ok, err := keyorder.Decode(off, md2)
	if !ok || err != nil {
		t.Fatalf("committed %d %q: %v %v", off, md2, ok, err)
	}
	if !p.Holds(15) {
		t.Errorf("committed %d with a set read back as %+v: 15, parked and never handled, is skipped as settled (lost)", off, p)
	}
	for o := int64(12); o < 30; o++ {
		if o != 15 && !p.Settled(o) && o >= off {
			t.Errorf("committed %d with a set read back as %+v: %d, settled, would be handled again", off, p, o)
			break
		}
	}
}

// committedPark is A1 (orders/0/10) failed into the tier, A2 (11) parked
// behind it and B1 (12) processed, committed: the tier record of A1, A2,
// key A's state record, and the floor (11) and metadata of partition 0.
func committedPark(t *testing.T) (m *Machine, now *time.Time, a1 txn.Output, a2 *txn.Record, state txn.Output, off int64, md string) {
	t.Helper()
	m, a, now := parking(t, 100)
	a1 = failHead(t, m, a)
	a2 = rec("orders", 0, 11, "A")
	state = handle(t, m, a2)[0]
	handle(t, m, rec("orders", 0, 12, "B"))
	off, md = m.Floor(ordersP0, 13)
	m.OnCommit()
	m.loadState = func(context.Context, []int32) (map[string][]byte, error) {
		return map[string][]byte{string(state.Key): state.Value}, nil
	}
	return m, now, a1, a2, state, off, md
}

// After a commit whose outcome is unknown (txn.Loop.reinitBlaming: OnAbort,
// the rewind with Resume at the committed offset and metadata, then
// Reload), the partition is read again from its floor. Reload forgets
// the parked set Resume had just read (keyorder.Set.Forget drops the
// windows), so the records settled above the floor are handled again.
func TestReloadKeepsTheSettledRecords(t *testing.T) {
	m, _, _, _, _, off, md := committedPark(t)
	handle(t, m, rec("orders", 0, 13, "C")) // the transaction whose commit outcome is unknown
	m.OnAbort()
	if err := m.Resume(ordersP0, off, md); err != nil { // the rewind
		t.Fatal(err)
	}
	if err := m.Reload(context.Background(), []int32{0}); err != nil { // reloadState
		t.Fatal(err)
	}
	if outs := handle(t, m, rec("orders", 0, 11, "A")); len(outs) != 0 {
		t.Fatalf("A2 read again: %v, want kept (parked)", topics(outs))
	}
	if outs := handle(t, m, rec("orders", 0, 12, "B")); len(outs) != 0 {
		t.Errorf("B1 read again after the reload: %v, want skipped (settled in the commit at %d): a duplicate", topics(outs), off)
	}
}

// The same reload drops from memory the parked records of partitions the
// unknown transaction did not touch, which are not rewound: their records
// are not read again, so a parked record is never due, its key never
// moves on, and its partition's commit stays at it (until a restart or a
// rebalance).
func TestReloadKeepsParkedRecordsOfPartitionsNotRewound(t *testing.T) {
	m, now, a1, a2, _, _, _ := committedPark(t)
	handle(t, m, rec("orders", 1, 5, "Z")) // the transaction whose commit outcome is unknown: partition 1 only
	m.OnAbort()
	if err := m.Resume(txn.TopicPartition{Topic: "orders", Partition: 1}, 5, ""); err != nil { // the rewind: partition 1
		t.Fatal(err)
	}
	if err := m.Reload(context.Background(), []int32{0, 1}); err != nil { // every assigned partition
		t.Fatal(err)
	}
	*now = t0.Add(31 * time.Second)
	if outs := handle(t, m, asRead(a1, 0)); len(outs) != 2 || outs[0].Topic != "orders.valid" {
		t.Fatalf("A1 at its turn: %v", topics(outs))
	}
	if due := m.Due(); len(due) != 1 || due[0] != a2 {
		t.Errorf("due %v, want A2: partition 0 was not rewound, so A2 is not read again and its key is stuck", due)
	}
}

// A partition read again from a commit with a parked set, whose parked
// records are all handled before it is read past the set's handled
// position: Floor has nothing parked and returns next with no metadata,
// though the set said the records from next up to its handled position
// were settled. The commit drops that: after a crash, a rebalance or a
// later abort's rewind, they are handled again (default configuration).
func TestParkedSetDroppedBeforeItsEnd(t *testing.T) {
	m, a, now := parking(t, 100)
	a1 := failHead(t, m, a)
	state := handle(t, m, rec("orders", 0, 11, "A"))[0]
	for o := int64(12); o < 16; o++ {
		handle(t, m, rec("orders", 0, o, "B"))
	}
	off, md := m.Floor(ordersP0, 16)
	m.OnCommit()

	// The next owner.
	n, _, now2 := parking(t, 100)
	if err := n.keys.Restore(map[string][]byte{string(state.Key): state.Value}); err != nil {
		t.Fatal(err)
	}
	if err := n.Resume(ordersP0, off, md); err != nil {
		t.Fatal(err)
	}
	a2 := rec("orders", 0, 11, "A")
	handle(t, n, a2) // kept
	*now, *now2 = t0.Add(31*time.Second), t0.Add(31*time.Second)
	handle(t, n, asRead(a1, 0))
	if due := n.Due(); len(due) != 1 || due[0] != a2 {
		t.Fatalf("due %v, want A2", due)
	}
	handle(t, n, a2)
	if outs := handle(t, n, rec("orders", 0, 12, "B")); len(outs) != 0 {
		t.Fatalf("12 read again: %v, want skipped", topics(outs))
	}
	got, gmd := committedBy(n, ordersP0, 13)
	p, ok, _ := keyorder.Decode(got, gmd)
	for o := got; o < 16; o++ {
		if !ok || !p.Settled(o) {
			t.Errorf("committed %d %q: %d, settled before, would be handled again", got, gmd, o)
			break
		}
	}
}
