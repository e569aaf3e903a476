package ledger

// Reduced is what Fold says of one failure's state, kept one change at a
// time (Add) instead of from all its changes at once: for a reader of many
// failures that needs their states alone (relay audit), a few dozen bytes
// per failure instead of a whole change per change. State gives exactly
// Fold's State and ReplayCount for the same changes, in any order.
type Reduced struct {
	// cur is the latest change by Before that is not a duplicate note,
	// last the latest of all; a change added later wins a tie, as in
	// Fold's stable sort.
	cur, last   change
	discarded   bool
	replayCount int
}

// change is what Before and State read of a change.
type change struct {
	at    int64 // Unix nanoseconds
	count int   // replay count
	rank  int8  // Rank; 0: none yet
	state State
	dup   bool // OutcomeDuplicate
}

func changeOf(e *Event) change {
	return change{at: e.At.UnixNano(), count: e.ReplayCount, rank: int8(Rank(e)), state: e.State, dup: e.Outcome == OutcomeDuplicate}
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
	r.replayCount = max(r.replayCount, e.ReplayCount)
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
	st = cur.state
	if last := r.last; last.dup && cur.state == Replaying && last.count >= cur.count {
		st = last.state
	}
	if st != Resolved && r.discarded {
		st = Discarded
	}
	return st, r.replayCount, true
}
