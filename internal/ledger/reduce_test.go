package ledger

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Reduced gives Fold's state and replay count for every set of changes,
// added in any order: random failures' histories of up to 8 changes
// over every state, outcome, replay count up to 3 and a few instants
// (ties included).
func TestReducedIsFold(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for i := range 200000 {
		n := 1 + rng.IntN(8)
		es := make([]*Event, n)
		for j := range es {
			es[j] = &Event{ID: "orders/0/1", State: States[rng.IntN(len(States))], ReplayCount: rng.IntN(4),
				At: t0.Add(time.Duration(rng.IntN(3)) * time.Second)}
			if rng.IntN(4) == 0 {
				es[j].Outcome = OutcomeDuplicate
			}
		}
		want := Fold(es)["orders/0/1"]
		var r Reduced
		for _, e := range es {
			r.Add(e)
		}
		st, rc, ok := r.State()
		if !ok || st != want.State || rc != want.ReplayCount {
			for _, e := range es {
				t.Logf("  %s count %d outcome %q at %s", e.State, e.ReplayCount, e.Outcome, e.At.Format(time.TimeOnly))
			}
			t.Fatalf("case %d: reduced %s/%d, Fold %s/%d", i, st, rc, want.State, want.ReplayCount)
		}
	}
}
