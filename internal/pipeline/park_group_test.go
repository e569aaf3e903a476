package pipeline

import (
	"testing"
)

// Parking waits for the group (KeyOrdering.Agreed): while one member does
// not announce it, a follower is copied into its head's tier (refused as
// "group"); once every member does, it is parked; when a member without
// it joins, new followers are copied and what is parked stays, until
// parking is withdrawn (KeyOrdering.Withdrawn: off for long): then it is
// handed back and copied, and the commit carries no parked set again.
func TestParkingFollowsTheGroup(t *testing.T) {
	m, a, _ := parking(t, 100)
	agreed, withdrawn := false, false
	m.keys.Agreed = func() bool { return agreed }
	m.keys.Withdrawn = func() bool { return withdrawn }
	failHead(t, m, a)
	outs := handle(t, m, rec("orders", 0, 11, "A"))
	if len(outs) != 2 || outs[0].Topic != "orders.retry.30s" || keySeq(outs[0].Headers) != 1 {
		t.Fatalf("A2 before the group agrees: %v, want copied into the 30s tier with place 1", topics(outs))
	}
	if got := m.ParkStats().Refused["group"]; got != 0 {
		t.Fatalf("refused[group] = %d before the commit", got)
	}
	m.OnCommit()
	if got := m.ParkStats().Refused["group"]; got != 1 {
		t.Fatalf("refused[group] = %d, want 1", got)
	}
	agreed = true
	a3 := rec("orders", 0, 12, "A")
	if outs := handle(t, m, a3); len(outs) != 1 || outs[0].Topic != "_relay.relay.state" {
		t.Fatalf("A3 once the group agrees: %v, want parked", topics(outs))
	}
	m.OnCommit()
	if off, md := m.Floor(ordersP0, 13); off != 12 || md == "" {
		t.Fatalf("floor %d %q, want 12 with a parked set", off, md)
	}
	agreed = false
	if due := m.Due(); len(due) != 0 {
		t.Fatalf("due %v once a member without parking joined, want A3 kept parked until parking is withdrawn", due)
	}
	if outs := handle(t, m, rec("orders", 0, 13, "A")); len(outs) != 2 || outs[0].Topic != "orders.retry.30s" || keySeq(outs[0].Headers) != 3 {
		t.Fatalf("A4 while the group does not agree: %v, want copied with place 3", topics(outs))
	}
	m.OnCommit()
	withdrawn = true
	due := m.Due()
	if len(due) != 1 || due[0] != a3 {
		t.Fatalf("due %v once parking is withdrawn, want A3 handed back", due)
	}
	outs = handle(t, m, a3)
	if len(outs) != 2 || outs[0].Topic != "orders.retry.30s" || keySeq(outs[0].Headers) != 2 {
		t.Fatalf("A3 handed back: %v, want copied behind A2 with place 2", topics(outs))
	}
	m.OnCommit()
	if off, md := m.Floor(ordersP0, 14); off != 14 || md != "" {
		t.Fatalf("floor %d %q, want 14 without metadata", off, md)
	}
	if n, _ := m.keys.Held(); n != 0 {
		t.Fatalf("%d records in memory", n)
	}
}
