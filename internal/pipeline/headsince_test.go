package pipeline

import (
	"testing"
	"time"

	"relay/internal/keyorder"
	"relay/internal/tiers"
)

// A head keeps its headSince while it hops, tier to tier and within a
// tier: its followers have waited behind it since it became the head. A
// follower parked later is parked at the machine's time, not its
// record's.
func TestHeadSinceKeptAcrossHops(t *testing.T) {
	m, a, now := parking(t, 100)
	a1 := failHead(t, m, a)
	m.OnCommit()
	*now = t0.Add(10 * time.Second)
	outs := handle(t, m, rec("orders", 0, 11, "A")) // its record's time is t0
	if s := stateOf(t, outs[0]); len(s.Parked) != 1 || s.Parked[0].At != now.UnixMilli() || s.HeadSince != t0.UnixMilli() {
		t.Fatalf("A2 parked: %+v, want parked at %d behind a head since %d", s, now.UnixMilli(), t0.UnixMilli())
	}
	m.OnCommit()
	for i, at := range []time.Duration{31 * time.Second, 6 * time.Minute} {
		*now = t0.Add(at)
		a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
		outs = handle(t, m, asRead(a1, int64(i)))
		if len(outs) != 2 || outs[0].Topic != "orders.retry.5m" {
			t.Fatalf("A1's hop %d: %v", i+1, topics(outs))
		}
		a1 = outs[0]
		if s := stateOf(t, outs[1]); s.Head != "orders/0/10" || s.Tier != 1 || s.HeadSince != t0.UnixMilli() || len(s.Parked) != 1 {
			t.Fatalf("A1's hop %d to tier 1: %+v, want the head since %d", i+1, s, t0.UnixMilli())
		}
		m.OnCommit()
	}
}

// A follower that fails at its turn becomes the head from then, parked
// or copied: the followers behind it wait behind it from that time, not
// since the head before it.
func TestHeadSinceOfAFollowerThatLeads(t *testing.T) {
	m, a, now := parking(t, 100)
	a1 := failHead(t, m, a)
	a2 := rec("orders", 0, 11, "A")
	handle(t, m, a2)
	handle(t, m, rec("orders", 0, 12, "A"))
	m.OnCommit()
	*now = t0.Add(31 * time.Second)
	outs := handle(t, m, asRead(a1, 0))
	if s := stateOf(t, outs[1]); s == nil || s.Head != "" || s.HeadSince != 0 || s.Next != 1 {
		t.Fatalf("A1 settled: %+v, want no head and no since", s)
	}
	m.OnCommit()
	*now = t0.Add(40 * time.Second)
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	outs = handle(t, m, a2)
	want := keyorder.Slot{Seq: 2, Offset: 12, At: t0.UnixMilli()}
	if s := stateOf(t, outs[1]); s.Head != "orders/0/11" || s.HeadSince != now.UnixMilli() || len(s.Parked) != 1 || s.Parked[0] != want {
		t.Fatalf("parked A2 failing at its turn: %+v, want the head since %d, A3 parked at t0", s, now.UnixMilli())
	}

	// Copied (parking off): A2 waits in the tier, and leads from its turn.
	m, a, now = keyed(t, false)
	a1 = failHead(t, m, a)
	c2 := handle(t, m, rec("orders", 0, 11, "A"))[0]
	m.OnCommit()
	*now = t0.Add(31 * time.Second)
	handle(t, m, asRead(a1, 0))
	m.OnCommit()
	*now = t0.Add(40 * time.Second)
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	outs = handle(t, m, asRead(c2, 1))
	if len(outs) != 2 || outs[0].Topic != "orders.retry.30s" {
		t.Fatalf("copied A2 failing at its turn: %v", topics(outs))
	}
	if s := stateOf(t, outs[1]); s.Head != "orders/0/11" || s.HeadSince != now.UnixMilli() {
		t.Fatalf("copied A2 failing at its turn: %+v, want the head since %d", s, now.UnixMilli())
	}
}
