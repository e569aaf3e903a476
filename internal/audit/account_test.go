package audit

import (
	"testing"

	"relay/internal/ledger"
)

func slotOf(outs, rejs, quars int, extra slot) slot {
	s := present | extra
	for range outs {
		s.add(outShift)
	}
	for range rejs {
		s.add(rejShift)
	}
	for range quars {
		s.add(quarShift)
	}
	return s
}

func withLedger(s slot, events ...ledger.State) slot {
	for i, st := range events {
		s.ledgered(st, i/2)
	}
	return s
}

// Every combination the scan can see, and its verdict.
func TestJudge(t *testing.T) {
	cases := []struct {
		name              string
		s                 slot
		consumed, deleted bool
		want              Verdict
	}{
		{"no record (aborted, marker)", 0, true, false, Gone},
		{"one output", slotOf(1, 0, 0, 0), true, false, Processed},
		{"one rejected", slotOf(0, 1, 0, 0), true, false, Rejected},
		{"quarantined, no ledger entry", slotOf(0, 0, 1, 0), true, false, Quarantined},
		{"quarantined open", withLedger(slotOf(0, 0, 1, 0), ledger.Open), true, false, Quarantined},
		{"quarantine record deleted, ledger open", withLedger(slotOf(0, 0, 0, 0), ledger.Open), true, true, Quarantined},
		{"resolved by a replay's output", withLedger(slotOf(1, 0, 1, 0), ledger.Open, ledger.Replaying, ledger.Resolved), true, false, Quarantined},
		{"resolved, replay rejected", withLedger(slotOf(0, 1, 1, 0), ledger.Open, ledger.Replaying, ledger.Resolved), true, false, Quarantined},
		{"resolved, output missing", withLedger(slotOf(0, 0, 1, 0), ledger.Open, ledger.Replaying, ledger.Resolved), true, false, Lost},
		{"resolved, output may be deleted", withLedger(slotOf(0, 0, 1, 0), ledger.Open, ledger.Replaying, ledger.Resolved), true, true, Unverifiable},
		{"discarded and output", withLedger(slotOf(1, 0, 1, 0), ledger.Open, ledger.Discarded), true, false, Duplicated},
		{"failed again twice", withLedger(slotOf(0, 0, 2, 0), ledger.Open, ledger.Replaying, ledger.FailedAgain), true, false, Quarantined},
		{"two outputs", slotOf(2, 0, 0, 0), true, false, Duplicated},
		{"three outputs", slotOf(3, 0, 0, 0), true, false, Duplicated},
		{"output and rejected", slotOf(1, 1, 0, 0), true, false, Duplicated},
		{"two rejected", slotOf(0, 2, 0, 0), true, false, Duplicated},
		{"not consumed", slotOf(0, 0, 0, 0), false, false, NotConsumed},
		{"not consumed, partial outputs", slotOf(1, 0, 0, 0), false, false, NotConsumed},
		{"copy waits in a tier", slotOf(0, 0, 0, tierFlight), true, false, InTier},
		{"copy replaying", withLedger(slotOf(0, 0, 1, replFlight), ledger.Open, ledger.Replaying), true, false, InReplay},
		{"nothing anywhere", slotOf(0, 0, 0, 0), true, false, Lost},
		{"nothing, derived records deleted", slotOf(0, 0, 0, 0), true, true, Unverifiable},
		{"processed though a tier record waits (a stale copy)", slotOf(1, 0, 0, tierFlight), true, false, Processed},
	}
	for _, c := range cases {
		if got, why := judge(c.s, c.consumed, c.deleted); got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, why, c.want)
		}
	}
}

// The ledger's current state is the change with the highest (replay
// count, rank), whatever order compaction left them in.
func TestLedgerStateIsTheLatest(t *testing.T) {
	var s slot
	s.ledgered(ledger.Resolved, 1)
	s.ledgered(ledger.Open, 0)
	s.ledgered(ledger.Replaying, 1)
	if s.state() != ledger.Resolved {
		t.Fatalf("state %q, want resolved", s.state())
	}
	s.ledgered(ledger.FailedAgain, 2)
	if s.state() != ledger.FailedAgain {
		t.Fatalf("state %q, want failed-again of the later replay", s.state())
	}
	s.add(outShift)
	if s.count(outShift) != 1 || s.state() != ledger.FailedAgain {
		t.Fatal("counts and the ledger state overlap in the slot")
	}
}

func TestParseID(t *testing.T) {
	for _, c := range []struct {
		id    string
		topic string
		p     int32
		off   int64
		ok    bool
	}{
		{"orders/3/42", "orders", 3, 42, true},
		{"a.b-c_d/0/0", "a.b-c_d", 0, 0, true},
		{"orders/3", "", 0, 0, false},
		{"/3/4", "", 0, 0, false},
		{"orders/x/4", "", 0, 0, false},
		{"", "", 0, 0, false},
	} {
		topic, p, off, err := parseID(c.id)
		if (err == nil) != c.ok || topic != c.topic || p != c.p || off != c.off {
			t.Errorf("parseID(%q) = %q %d %d %v", c.id, topic, p, off, err)
		}
	}
}

func TestTierTopicMatches(t *testing.T) {
	pat := []string{"orders.retry.", ""}
	for name, want := range map[string]bool{"orders.retry.30s": true, "orders.retry.5m": true, "orders.retry.": false, "orders.valid": false} {
		if matches(pat, name) != want {
			t.Errorf("matches(%q) = %v", name, !want)
		}
	}
	pat = []string{"retry-", "-orders"}
	if !matches(pat, "retry-30s-orders") || matches(pat, "retry--orders") || matches(pat, "retry-30s-orders-x") {
		t.Error("a delay in the middle of the template")
	}
}
