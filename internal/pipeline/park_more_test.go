package pipeline

import (
	"maps"
	"strings"
	"testing"
	"time"

	"relay/internal/keyorder"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// Two followers parked behind a head: each is handed back at its turn,
// one after the other, and the commit moves past each as it goes.
func TestParkedFollowersTakeTheirTurnsInOrder(t *testing.T) {
	m, a, now := parking(t, 100)
	a1 := failHead(t, m, a)
	a2, a3 := rec("orders", 0, 11, "A"), rec("orders", 0, 12, "A")
	handle(t, m, a2)
	handle(t, m, a3)
	off, md := m.Floor(ordersP0, 13)
	if p, ok, _ := keyorder.Decode(off, md); off != 11 || !ok || len(p.Offsets) != 2 || !p.Holds(12) {
		t.Fatalf("floor %d %q, want 11 with 11 and 12 parked", off, md)
	}
	m.OnCommit()
	*now = t0.Add(31 * time.Second)
	handle(t, m, asRead(a1, 0))
	if due := m.Due(); len(due) != 1 || due[0] != a2 {
		t.Fatalf("due %v, want A2", due)
	}
	if outs := handle(t, m, a2); len(outs) != 2 || outs[0].Topic != "orders.valid" {
		t.Fatalf("A2 at its turn: %v", topics(outs))
	} else if s := stateOf(t, outs[1]); s == nil || s.Next != 2 || len(s.Parked) != 1 || s.Parked[0] != (keyorder.Slot{Seq: 2, Offset: 12, At: t0.UnixMilli()}) {
		t.Fatalf("state after A2 %+v, want A3 alone parked, at its turn", s)
	}
	if off, _ := m.Floor(ordersP0, 13); off != 12 {
		t.Fatalf("floor %d after A2, want 12 (A3)", off)
	}
	if due := m.Due(); len(due) != 1 || due[0] != a3 {
		t.Fatalf("due %v, want A3", due)
	}
	if outs := handle(t, m, a3); len(outs) != 2 || outs[0].Topic != "orders.valid" || outs[1].Value != nil {
		t.Fatalf("A3 at its turn: %v", topics(outs))
	}
	if off, md := m.Floor(ordersP0, 13); off != 13 || md != "" {
		t.Fatalf("floor %d %q, want 13", off, md)
	}
}

// A new owner whose head comes back from the tier before the partition
// has read its parked follower again: the follower is not due until it is
// in memory, and due once it is read again.
func TestParkedFollowerDueOnceReadAgain(t *testing.T) {
	m, a, now := parking(t, 100)
	a1 := failHead(t, m, a)
	state := handle(t, m, rec("orders", 0, 11, "A"))[0]
	off, md := m.Floor(ordersP0, 12)
	m.OnCommit()

	n, _, now2 := parking(t, 100)
	if err := n.keys.Restore(map[string][]byte{string(state.Key): state.Value}); err != nil {
		t.Fatal(err)
	}
	if err := n.Resume(ordersP0, off, md); err != nil {
		t.Fatal(err)
	}
	*now, *now2 = t0.Add(31*time.Second), t0.Add(31*time.Second)
	if outs := handle(t, n, asRead(a1, 0)); len(outs) != 2 || outs[0].Topic != "orders.valid" {
		t.Fatalf("A1 at its turn: %v", topics(outs))
	}
	if due := n.Due(); len(due) != 0 {
		t.Fatalf("due %v before A2 is read again", due)
	}
	a2 := rec("orders", 0, 11, "A")
	if outs := handle(t, n, a2); len(outs) != 0 {
		t.Fatalf("A2 read again: %v, want kept", topics(outs))
	}
	if due := n.Due(); len(due) != 1 || due[0] != a2 {
		t.Fatalf("due %v, want A2", due)
	}
}

// ParkStats, as of the last commit: the parked records and bytes, how far
// each partition's floor stays behind, and the followers copied instead,
// by reason (parking off is no refusal; an aborted refusal does not count).
func TestParkStats(t *testing.T) {
	m, a, _ := parking(t, 1)
	failHead(t, m, a)
	a2 := rec("orders", 0, 11, "A")
	handle(t, m, a2)
	handle(t, m, rec("orders", 0, 12, "A")) // over the limit: copied
	m.Floor(ordersP0, 13)
	m.OnCommit()
	st := m.ParkStats()
	if st.Records != 1 || st.Bytes != recordSize(a2) {
		t.Errorf("parked %d records, %d bytes; want 1, %d", st.Records, st.Bytes, recordSize(a2))
	}
	if want := map[keyorder.Part]int64{{Topic: "orders", Partition: 0}: 2}; !maps.Equal(st.Behind, want) {
		t.Errorf("behind %v, want %v", st.Behind, want)
	}
	if want := map[string]int64{"records": 1}; !maps.Equal(st.Refused, want) {
		t.Errorf("refused %v, want %v", st.Refused, want)
	}
	handle(t, m, rec("orders", 0, 13, "A"))
	m.OnAbort()
	if got := m.ParkStats().Refused; got["records"] != 1 {
		t.Errorf("refused %v after an aborted refusal, want records 1", got)
	}

	off, a, _ := keyed(t, false) // parking off
	failHead(t, off, a)
	handle(t, off, rec("orders", 0, 11, "A"))
	off.OnCommit()
	if got := off.ParkStats().Refused; len(got) != 0 {
		t.Errorf("refused %v with parking off, want none", got)
	}
}

// A record's headers count in its size: a follower whose headers are
// over the bytes limit is copied.
func TestParkedBytesCountTheHeaders(t *testing.T) {
	m, a, _ := parking(t, 100)
	m.keys.Park.Bytes = 1000
	failHead(t, m, a)
	r := rec("orders", 0, 11, "A")
	r.Headers = []txn.Header{{Key: "trace", Value: []byte(strings.Repeat("x", 2000))}}
	outs := handle(t, m, r)
	if len(outs) != 2 || outs[0].Topic != "orders.retry.30s" {
		t.Fatalf("A2 with 2000 bytes of headers, limit 1000: %v, want copied", topics(outs))
	}
	if n, _ := m.keys.Held(); n != 0 {
		t.Fatalf("%d records held", n)
	}
}

// A follower of a key whose head is due later than the wait is copied
// into the head's tier, not parked.
func TestFollowerOfALongTierIsCopied(t *testing.T) {
	m, a, now := parking(t, 100)
	a1 := failHead(t, m, a)
	m.OnCommit()
	*now = t0.Add(31 * time.Second)
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	if outs := handle(t, m, asRead(a1, 0)); len(outs) != 2 || outs[0].Topic != "orders.retry.5m" {
		t.Fatalf("A1 failing again: %v, want the 5m tier", topics(outs))
	}
	outs := handle(t, m, rec("orders", 0, 11, "A"))
	if len(outs) != 2 || outs[0].Topic != "orders.retry.5m" {
		t.Fatalf("A2 behind a head due in 5m, wait 1m: %v, want copied into the 5m tier", topics(outs))
	}
	m.OnCommit()
	if got := m.ParkStats().Refused; got["wait"] != 1 {
		t.Errorf("refused %v, want wait 1", got)
	}
}

// A parked record read again while its earlier copy is still in memory is
// kept again, not taken for the copy handed back at its turn (the loop
// hands back the very record Due returned).
func TestParkedRecordReadAgainBesideItsKeptCopy(t *testing.T) {
	m, a, now := parking(t, 100)
	a1 := failHead(t, m, a)
	handle(t, m, rec("orders", 0, 11, "A"))
	m.OnCommit()
	again := rec("orders", 0, 11, "A")
	if outs := handle(t, m, again); len(outs) != 0 {
		t.Fatalf("A2 read again: %v, want kept (still parked)", topics(outs))
	}
	if n, _ := m.keys.Held(); n != 1 {
		t.Fatalf("%d records held, want 1", n)
	}
	*now = t0.Add(31 * time.Second)
	handle(t, m, asRead(a1, 0))
	if due := m.Due(); len(due) != 1 || due[0] != again {
		t.Fatalf("due %v, want the copy read again", due)
	}
}
