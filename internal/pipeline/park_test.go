package pipeline

import (
	"context"
	"testing"
	"time"

	"relay/internal/keyorder"
	"relay/internal/tiers"
	"relay/internal/txn"
)

var ordersP0 = txn.TopicPartition{Topic: "orders", Partition: 0}

func parking(t *testing.T, records int) (*Machine, *scriptedAdmitter, *time.Time) {
	t.Helper()
	m, a, now := keyed(t, false)
	m.keys.Park = keyorder.Limits{Records: records, Bytes: 1 << 20, Wait: time.Minute, Metadata: keyorder.DefaultMetadata}
	return m, a, now
}

func handle(t *testing.T, m *Machine, r *txn.Record) []txn.Output {
	t.Helper()
	outs, err := m.Handle(context.Background(), r)
	if err != nil {
		t.Fatalf("%s/%d/%d: %v", r.Topic, r.Partition, r.Offset, err)
	}
	return outs
}

// failHead makes A1 (orders/0/10) fail into the first tier and returns
// its tier record.
func failHead(t *testing.T, m *Machine, a *scriptedAdmitter) txn.Output {
	t.Helper()
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	outs := handle(t, m, rec("orders", 0, 10, "A"))
	if len(outs) != 2 || outs[0].Topic != "orders.retry.30s" {
		t.Fatalf("A1: %v", topics(outs))
	}
	return outs[0]
}

// A follower of a blocked key is parked: nothing but its key's state is
// written, and its partition commits at it, the records after it settled
// in the metadata. When the head is processed, the follower is due, and
// handled at its turn.
func TestParkedFollowerWaitsInMemory(t *testing.T) {
	m, a, now := parking(t, 100)
	a1 := failHead(t, m, a)
	calls := a.calls
	a2 := rec("orders", 0, 11, "A")
	outs := handle(t, m, a2)
	if len(outs) != 1 || outs[0].Topic != "_relay.relay.state" || a.calls != calls {
		t.Fatalf("A2 must be parked without an attempt: %v, calls %d", topics(outs), a.calls-calls)
	}
	if s := stateOf(t, outs[0]); s.Tail != 2 || len(s.Parked) != 1 || s.Parked[0] != (keyorder.Slot{Seq: 1, Offset: 11, At: t0.UnixMilli()}) || s.HeadSince != t0.UnixMilli() {
		t.Fatalf("A2 state %+v", s)
	}
	if outs := handle(t, m, rec("orders", 0, 12, "B")); len(outs) != 1 || outs[0].Topic != "orders.valid" {
		t.Fatalf("B1 must not wait: %v", topics(outs))
	}
	off, md := m.Floor(ordersP0, 13)
	p, ok, err := keyorder.Decode(off, md)
	if off != 11 || !ok || err != nil || len(p.Offsets) != 1 || p.Hi != 13 {
		t.Fatalf("floor %d %q (%+v %v %v), want 11 with 11 parked up to 13", off, md, p, ok, err)
	}
	if d := m.Due(); len(d) != 0 {
		t.Fatalf("%d due before the head is processed", len(d))
	}
	m.OnCommit()
	*now = t0.Add(31 * time.Second)
	outs = handle(t, m, asRead(a1, 0))
	if len(outs) != 2 || outs[0].Topic != "orders.valid" {
		t.Fatalf("A1 at its turn: %v", topics(outs))
	}
	due := m.Due()
	if len(due) != 1 || due[0] != a2 {
		t.Fatalf("due %v, want A2", due)
	}
	outs = handle(t, m, due[0])
	if len(outs) != 2 || outs[0].Topic != "orders.valid" || outs[1].Value != nil {
		t.Fatalf("A2 at its turn: %v", topics(outs))
	}
	if m.keys.Blocked() != 0 || len(m.Due()) != 0 {
		t.Fatal("the key must be free again, nothing due")
	}
	if n, _ := m.keys.Held(); n != 0 {
		t.Fatalf("%d records still in memory", n)
	}
	if off, md := m.Floor(ordersP0, 13); off != 13 || md != "" {
		t.Fatalf("floor %d %q, want 13 and nothing parked", off, md)
	}
}

// A partition read again from a commit with a parked record (a restart,
// a new owner) keeps that record in memory again, skips the records
// settled above it, and handles the rest; the parked one at its turn.
func TestParkedFollowerReadAgain(t *testing.T) {
	m, a, now := parking(t, 100)
	a1 := failHead(t, m, a)
	state := handle(t, m, rec("orders", 0, 11, "A"))[0]
	handle(t, m, rec("orders", 0, 12, "B"))
	off, md := m.Floor(ordersP0, 13)
	m.OnCommit()

	// The next owner.
	n, a, now2 := parking(t, 100)
	if err := n.keys.Restore(map[string][]byte{string(state.Key): state.Value}); err != nil {
		t.Fatal(err)
	}
	if err := n.Resume(ordersP0, off, md); err != nil {
		t.Fatal(err)
	}
	calls := a.calls
	a2 := rec("orders", 0, 11, "A")
	for _, r := range []*txn.Record{a2, rec("orders", 0, 12, "B")} {
		if outs := handle(t, n, r); len(outs) != 0 {
			t.Fatalf("offset %d read again: %v, want nothing written", r.Offset, topics(outs))
		}
	}
	if a.calls != calls {
		t.Fatal("a record read again was tried")
	}
	if outs := handle(t, n, rec("orders", 0, 13, "C")); len(outs) != 1 || outs[0].Topic != "orders.valid" {
		t.Fatalf("C1, after the parked set: %v", topics(outs))
	}
	if off, _ := n.Floor(ordersP0, 14); off != 11 {
		t.Fatalf("floor %d, want 11 (A2 parked still)", off)
	}
	*now, *now2 = t0.Add(31*time.Second), t0.Add(31*time.Second)
	handle(t, n, asRead(a1, 0))
	due := n.Due()
	if len(due) != 1 || due[0] != a2 {
		t.Fatalf("due %v, want A2", due)
	}
	if outs := handle(t, n, a2); len(outs) != 2 || outs[0].Topic != "orders.valid" {
		t.Fatalf("A2 at its turn: %v", topics(outs))
	}
	if off, md := n.Floor(ordersP0, 14); off != 14 || md != "" {
		t.Fatalf("floor %d %q, want 14", off, md)
	}
}

// A parked follower that fails at its turn becomes its key's head in the
// tier, with its place; the follower parked behind it stays parked.
func TestParkedFollowerFailsAndLeads(t *testing.T) {
	m, a, now := parking(t, 100)
	a1 := failHead(t, m, a)
	a2, a3 := rec("orders", 0, 11, "A"), rec("orders", 0, 12, "A")
	handle(t, m, a2)
	handle(t, m, a3)
	m.OnCommit()
	*now = t0.Add(31 * time.Second)
	handle(t, m, asRead(a1, 0))
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	outs := handle(t, m, a2)
	if len(outs) != 2 || outs[0].Topic != "orders.retry.30s" || keySeq(outs[0].Headers) != 1 {
		t.Fatalf("A2 failing at its turn: %v", topics(outs))
	}
	if s := stateOf(t, outs[1]); s.Next != 1 || s.Head != "orders/0/11" || len(s.Parked) != 1 || s.Parked[0].Seq != 2 {
		t.Fatalf("state %+v", s)
	}
	if d := m.Due(); len(d) != 0 {
		t.Fatalf("A3 due behind a head in a tier: %v", d)
	}
	if off, _ := m.Floor(ordersP0, 13); off != 12 {
		t.Fatalf("floor %d, want 12 (A3)", off)
	}
}

// Past the limit a follower is copied into the tier, behind the parked
// one, and the order holds: the parked one first, then the copy.
func TestParkingLimitCopies(t *testing.T) {
	m, a, now := parking(t, 1)
	a1 := failHead(t, m, a)
	a2 := rec("orders", 0, 11, "A")
	if outs := handle(t, m, a2); len(outs) != 1 {
		t.Fatalf("A2: %v, want parked", topics(outs))
	}
	outs := handle(t, m, rec("orders", 0, 12, "A"))
	if len(outs) != 2 || outs[0].Topic != "orders.retry.30s" || keySeq(outs[0].Headers) != 2 {
		t.Fatalf("A3 past the limit: %v, want copied with place 2", topics(outs))
	}
	a3 := outs[0]
	m.OnCommit()
	*now = t0.Add(31 * time.Second)
	if outs := handle(t, m, asRead(a3, 1)); len(outs) != 1 || outs[0].Topic != "orders.retry.30s" {
		t.Fatalf("A3 before its turn: %v, want back behind", topics(outs))
	}
	handle(t, m, asRead(a1, 0))
	if d := m.Due(); len(d) != 1 || d[0] != a2 {
		t.Fatalf("due %v, want A2", d)
	}
	handle(t, m, a2)
	if outs := handle(t, m, asRead(a3, 2)); len(outs) != 2 || outs[0].Topic != "orders.valid" || outs[1].Value != nil {
		t.Fatalf("A3 at its turn: %v", topics(outs))
	}
}

// An abort undoes a park: the key's state goes back, and the partition's
// rewind lets the record go from memory.
func TestParkAbort(t *testing.T) {
	m, a, _ := parking(t, 100)
	failHead(t, m, a)
	m.OnCommit()
	handle(t, m, rec("orders", 0, 11, "A"))
	m.OnAbort()
	if err := m.Resume(ordersP0, 11, ""); err != nil {
		t.Fatal(err)
	}
	if s := m.keys.get(stateKey("orders", 0, []byte("A"))); s == nil || s.Tail != 1 || len(s.Parked) != 0 {
		t.Fatalf("state after the abort %+v", s)
	}
	if n, b := m.keys.Held(); n != 0 || b != 0 {
		t.Fatalf("%d records (%d bytes) in memory after the rewind", n, b)
	}
	if off, md := m.Floor(ordersP0, 12); off != 12 || md != "" {
		t.Fatalf("floor %d %q", off, md)
	}
}

// A key whose head moves to a tier due later than the wait hands its
// parked records back to be copied behind it: its partition's commit is
// not held back for as long.
func TestParkedFollowersSpillBehindALongTier(t *testing.T) {
	m, a, now := parking(t, 100)
	m.keys.Spill(m.keys.Park.Wait, 0, m.now)
	a1 := failHead(t, m, a)
	a2 := rec("orders", 0, 11, "A")
	handle(t, m, a2)
	m.OnCommit()
	*now = t0.Add(31 * time.Second)
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	outs := handle(t, m, asRead(a1, 0))
	if len(outs) != 2 || outs[0].Topic != "orders.retry.5m" {
		t.Fatalf("A1 failing again: %v, want the 5m tier", topics(outs))
	}
	due := m.Due()
	if len(due) != 1 || due[0] != a2 {
		t.Fatalf("due %v, want A2 to be copied", due)
	}
	outs = handle(t, m, a2)
	if len(outs) != 2 || outs[0].Topic != "orders.retry.5m" || keySeq(outs[0].Headers) != 1 {
		t.Fatalf("A2 spilled: %v, want copied into the 5m tier with place 1", topics(outs))
	}
	if s := stateOf(t, outs[1]); s.Next != 0 || s.Tail != 2 || len(s.Parked) != 0 {
		t.Fatalf("state %+v", s)
	}
	if n, _ := m.keys.Held(); n != 0 || len(m.Due()) != 0 {
		t.Fatalf("%d records in memory, %d due after the spill", n, len(m.Due()))
	}
	if off, md := m.Floor(ordersP0, 12); off != 12 || md != "" {
		t.Fatalf("floor %d %q, want 12", off, md)
	}
}

// Once the brokers refused a commit's parked set as too large
// (OFFSET_METADATA_TOO_LARGE: their limit was lowered, or could not be
// read at start), parking stops until restart: the parked follower is
// handed back and copied behind its head, a new follower is copied, and
// the partition commits without metadata. Otherwise every commit of the
// partition would be refused again.
func TestParkedFollowersAreCopiedOnceTheMetadataIsRefused(t *testing.T) {
	m, a, _ := parking(t, 100)
	failHead(t, m, a)
	a2 := rec("orders", 0, 11, "A")
	if outs := handle(t, m, a2); len(outs) != 1 {
		t.Fatalf("A2 not parked: %v", topics(outs))
	}
	m.OnCommit()
	m.MetadataRefused()
	due := m.Due()
	if len(due) != 1 || due[0] != a2 {
		t.Fatalf("due %v, want A2 handed back to be copied", due)
	}
	outs := handle(t, m, a2)
	if len(outs) != 2 || outs[0].Topic != "orders.retry.30s" || keySeq(outs[0].Headers) != 1 {
		t.Fatalf("A2 after the refusal: %v, want copied into the 30s tier with place 1", topics(outs))
	}
	if s := stateOf(t, outs[1]); s.Tail != 2 || len(s.Parked) != 0 {
		t.Fatalf("state %+v, want nothing parked", s)
	}
	outs = handle(t, m, rec("orders", 0, 12, "A"))
	if len(outs) != 2 || outs[0].Topic != "orders.retry.30s" || keySeq(outs[0].Headers) != 2 {
		t.Fatalf("A3 after the refusal: %v, want copied, not parked", topics(outs))
	}
	if n, _ := m.keys.Held(); n != 0 {
		t.Fatalf("%d records in memory", n)
	}
	if off, md := m.Floor(ordersP0, 13); off != 13 || md != "" {
		t.Fatalf("floor %d %q, want 13 without metadata", off, md)
	}
}

// A follower stays parked at most RELAY_KEY_PARK_MAX_AGE, whatever its
// head does: a head retried in one short tier again and again keeps each
// hop within the wait, and would hold its partition's commit back for as
// long as its retry budget lasts. Past the age it is handed back and
// copied behind its head, with nothing else happening to its key.
func TestParkedFollowerIsCopiedPastItsMaxAge(t *testing.T) {
	m, a, now := parking(t, 100)
	m.keys.Spill(0, 2*time.Minute, m.now) // the age alone
	failHead(t, m, a)
	a2 := rec("orders", 0, 11, "A")
	if outs := handle(t, m, a2); len(outs) != 1 {
		t.Fatalf("A2 not parked: %v", topics(outs))
	}
	m.OnCommit()
	*now = t0.Add(119 * time.Second)
	if d := m.Due(); len(d) != 0 {
		t.Fatalf("%d due before the age", len(d))
	}
	*now = t0.Add(121 * time.Second)
	due := m.Due()
	if len(due) != 1 || due[0] != a2 {
		t.Fatalf("due %v past the age, want A2", due)
	}
	outs := handle(t, m, a2)
	if len(outs) != 2 || outs[0].Topic != "orders.retry.30s" || keySeq(outs[0].Headers) != 1 {
		t.Fatalf("A2 past its age: %v, want copied into the 30s tier with place 1", topics(outs))
	}
	if s := stateOf(t, outs[1]); len(s.Parked) != 0 {
		t.Fatalf("state %+v, want nothing parked", s)
	}
	if off, md := m.Floor(ordersP0, 12); off != 12 || md != "" {
		t.Fatalf("floor %d %q, want 12 without metadata", off, md)
	}
}
