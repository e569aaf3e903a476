package ledger

// Reduced is what Fold says of one failure's state, kept one change at a
// time (Add) instead of from all its changes at once: for a reader of many
// failures that needs their states alone (relay audit), 40 bytes per
// failure instead of a whole change per change. State gives exactly
// Fold's State and ReplayCount for the same changes, in any order.
type Reduced struct {
	// cur is the latest change by Before that is not a duplicate note,
	// last the latest of all; a change added later wins a tie, as in
	// Fold's stable sort.
	cur, last   change
	discarded   bool
	replayCount int32
}

// change is what Before and State read of a change: 16 bytes, so that a
// Reduced is 40 (relay audit keeps one per failure of its window).
type change struct {
	at    int64 // Unix nanoseconds
	count int32 // replay count
	rank  int8  // Rank; 0: none yet
	state uint8 // index in States
	dup   bool  // OutcomeDuplicate
}

// stateIndex is s's index in States (Decode refuses any other state).
func stateIndex(s State) uint8 {
	for i, x := range States {
		if x == s {
			return uint8(i) //nolint:gosec // a handful of states
		}
	}
	return 0
}

func changeOf(e *Event) change {
	return change{at: e.At.UnixNano(), count: clamp32(e.ReplayCount), rank: int8(Rank(e)), state: stateIndex(e.State), dup: e.Outcome == OutcomeDuplicate} //nolint:gosec // Rank is below 10
}

// clamp32 is n within int32: a replay count never comes near it.
func clamp32(n int) int32 {
	return int32(min(max(n, -1<<31), 1<<31-1)) //nolint:gosec // clamped
}

// before is Before, on changes.
func (a change) before(b change) bool {
	switch {
	case a.count != b.count:
		return a.count < b.count
	case a.rank != b.rank:
		return a.rank < b.rank
	}
	return a.at < b.at
}

// Add takes one change of the failure into account.
func (r *Reduced) Add(e *Event) {
	c := changeOf(e)
	if r.last.rank == 0 || !c.before(r.last) {
		r.last = c
	}
	if !c.dup {
		if r.cur.rank == 0 || !c.before(r.cur) {
			r.cur = c
		}
		if e.State == Discarded {
			r.discarded = true
		}
	}
	r.replayCount = max(r.replayCount, clamp32(e.ReplayCount))
}

// State is the failure's state and replay count, as Fold gives them; ok
// is false before any change was added.
func (r *Reduced) State() (st State, replayCount int, ok bool) {
	if r.last.rank == 0 {
		return "", 0, false
	}
	cur := r.last
	if r.cur.rank != 0 {
		cur = r.cur
	}
	st = States[cur.state]
	if last := r.last; last.dup && st == Replaying && last.count >= cur.count {
		st = States[last.state]
	}
	if st != Resolved && r.discarded {
		st = Discarded
	}
	return st, int(r.replayCount), true
}
