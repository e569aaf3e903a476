package ledger

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)

func ev(state State, count int, at time.Duration) *Event {
	return &Event{ID: "orders/1/7", State: state, At: t0.Add(at), ReplayCount: count, Code: "HOOK_INVALID_INPUT",
		Source: Source{Topic: "orders", Partition: 1, Offset: 7}}
}

// A failure's life, in whatever order compaction leaves it, folds to the
// same history and state.
func TestFoldOrdersHistoryWhateverTheReadOrder(t *testing.T) {
	open := ev(Open, 0, 0)
	open.Topic, open.RecordTime = "orders.quarantine", t0.Add(-time.Hour)
	r1 := ev(Replaying, 1, time.Hour)
	failed := ev(FailedAgain, 1, time.Hour+time.Second)
	failed.Topic, failed.RecordTime, failed.Code = "orders.quarantine", t0.Add(time.Hour), "PAYLOAD_MALFORMED"
	r2 := ev(Replaying, 2, 2*time.Hour)
	resolved := ev(Resolved, 2, 2*time.Hour+time.Second)
	resolved.Outcome = OutcomeProcessed
	dup := ev(Resolved, 2, 3*time.Hour)
	dup.Outcome = OutcomeDuplicate
	life := []*Event{open, r1, failed, r2, resolved, dup}
	for range 20 {
		shuffled := append([]*Event{}, life...)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		en := Fold(shuffled)["orders/1/7"]
		if en.State != Resolved || en.ReplayCount != 2 || en.Code != "PAYLOAD_MALFORMED" || !en.Since.Equal(t0) ||
			!en.RecordTime.Equal(t0.Add(time.Hour)) || en.Current().Outcome != OutcomeProcessed {
			t.Fatalf("entry %+v", en)
		}
		for i, want := range []State{Open, Replaying, FailedAgain, Replaying, Resolved, Resolved} {
			if en.History[i].State != want {
				t.Fatalf("history[%d] = %s, want %s", i, en.History[i].State, want)
			}
		}
	}
}

func TestDiscardAfterFailedAgainIsTheState(t *testing.T) {
	d := ev(Discarded, 1, 3*time.Hour)
	en := Fold([]*Event{d, ev(FailedAgain, 1, time.Hour), ev(Replaying, 1, 0), ev(Open, 0, 0)})["orders/1/7"]
	if en.State != Discarded || Unresolved(en.State) {
		t.Fatalf("state %s", en.State)
	}
}

func TestKeysKeepEveryChange(t *testing.T) {
	seen := map[string]bool{}
	dup := ev(Resolved, 1, 0)
	dup.Outcome = OutcomeDuplicate
	for _, e := range []*Event{ev(Open, 0, 0), ev(Replaying, 1, 0), ev(Resolved, 1, 0), dup, ev(Replaying, 2, 0), ev(Discarded, 2, 0)} {
		if seen[e.Key()] {
			t.Fatalf("key %s used twice: compaction would drop a change", e.Key())
		}
		seen[e.Key()] = true
		back, ok, err := Decode(e.Key(), e.Value())
		if !ok || err != nil || back.State != e.State || back.Partition() != 1 {
			t.Fatalf("round trip of %s: %+v %v", e.Key(), back, err)
		}
	}
	if _, ok, _ := Decode("key|orders|1|QQ", []byte(`{}`)); ok {
		t.Fatal("key ordering's records are not the ledger's")
	}
	if _, ok, err := Decode("q|x|0|open", []byte(`{"failureId":"x","state":"lost"}`)); !ok || err == nil {
		t.Fatal("an unknown state must be an error")
	}
}

func TestSummarizeCountsOldestAndDeadline(t *testing.T) {
	items := []Item{
		{State: Open, Code: "A", Since: t0.Add(-3 * time.Hour), RecordTime: t0.Add(-50 * time.Hour), Topic: "q"},
		{State: FailedAgain, Code: "A", Since: t0.Add(-time.Hour), RecordTime: t0.Add(-time.Hour), Topic: "q"},
		{State: Replaying, Code: "B", Since: t0.Add(-2 * time.Hour), RecordTime: t0.Add(-2 * time.Hour), Topic: "q"},
		{State: Resolved, Code: "A", Since: t0.Add(-100 * time.Hour), RecordTime: t0.Add(-100 * time.Hour), Topic: "q"},
		{State: Discarded, Code: "C", Since: t0, Topic: "q"},
	}
	s := Summarize(items, func(string) (time.Duration, bool) { return 720 * time.Hour, true })
	if s.ByState[Open] != 1 || s.ByState[Resolved] != 1 || len(s.ByCode) != 2 {
		t.Fatalf("summary %+v", s)
	}
	if a := s.ByCode[0]; a.Code != "A" || a.Unresolved != 2 || !a.Oldest.Equal(t0.Add(-3*time.Hour)) {
		t.Fatalf("code A %+v", a)
	}
	// Settled records do not hold the deadline: the oldest unresolved does.
	if d := s.Deadline["q"]; !d.Equal(t0.Add(-50 * time.Hour).Add(720 * time.Hour)) {
		t.Fatalf("deadline %s", d)
	}
	if s := Summarize(items, func(string) (time.Duration, bool) { return 0, false }); len(s.Deadline) != 0 {
		t.Fatal("no deadline without a known retention")
	}
}

func TestIndexFollowsChangesAndDrops(t *testing.T) {
	var x Index
	open := ev(Open, 0, 0)
	open.Topic, open.RecordTime = "q", t0
	x.Apply(1, open)
	x.Apply(1, ev(Replaying, 1, time.Minute))
	other := ev(Open, 0, 0)
	other.ID, other.Code = "orders/2/1", "B"
	x.Apply(2, other)
	if s := x.Summary(nil); s.ByState[Replaying] != 1 || s.ByState[Open] != 1 {
		t.Fatalf("%+v", s)
	}
	// Read late: an older change does not undo a newer one.
	x.Apply(1, ev(Open, 0, 0))
	x.Apply(1, ev(Discarded, 1, 2*time.Minute))
	if s := x.Summary(nil); s.ByState[Discarded] != 1 || len(s.ByCode) != 1 || s.ByCode[0].Code != "B" {
		t.Fatalf("%+v", s)
	}
	x.Drop([]int32{2})
	if s := x.Summary(nil); len(s.ByCode) != 0 {
		t.Fatalf("dropped partition still counted: %+v", s)
	}
}

func TestSettledRecognisesCopiesAndUndoesAborts(t *testing.T) {
	var s Settled
	if _, done := s.Check("orders/1/7", 1); done {
		t.Fatal("nothing settled yet")
	}
	s.Record(ev(FailedAgain, 1, 0))
	s.Commit()
	if st, done := s.Check("orders/1/7", 1); !done || st != FailedAgain {
		t.Fatal("a copy of the replay that failed again is settled")
	}
	if _, done := s.Check("orders/1/7", 2); done {
		t.Fatal("a new replay of a failed-again record is not a copy")
	}
	s.Record(ev(Resolved, 2, 0))
	s.Abort()
	if _, done := s.Check("orders/1/7", 2); done {
		t.Fatal("an aborted transaction's resolution must be undone")
	}
	s.Record(ev(Resolved, 2, 0))
	s.Commit()
	if st, done := s.Check("orders/1/7", 3); !done || st != Resolved {
		t.Fatal("resolved is settled for any later copy")
	}
	var r Settled
	e := ev(Resolved, 1, 0)
	bad := map[string][]byte{e.Key(): e.Value(), "key|x": []byte("{}"), ev(Open, 0, 0).Key(): ev(Open, 0, 0).Value(),
		"q|y|0|open": []byte(`{"failureId":"y","state":"archived"}`)}
	if skipped := r.Restore(bad); len(skipped) != 1 {
		t.Fatalf("skipped %v, want the one unreadable record", skipped)
	}
	if _, done := r.Check("orders/1/7", 1); !done || r.Len() != 1 {
		t.Fatal("restore must bring settled failures back")
	}
	r.Forget([]int32{1})
	if r.Len() != 0 {
		t.Fatal("forget drops a revoked partition's failures")
	}
}

// A replay whose record relay recognised as a copy of a settled failure
// does not leave the failure replaying for ever.
func TestDuplicateSettlesAReplayingFailure(t *testing.T) {
	disc := ev(Discarded, 0, time.Minute)
	dup := ev(Discarded, 1, 3*time.Minute)
	dup.Outcome = OutcomeDuplicate
	life := []*Event{ev(Open, 0, 0), disc, ev(Replaying, 1, 2*time.Minute), dup}
	if en := Fold(life)["orders/1/7"]; en.State != Discarded {
		t.Fatalf("state %s, want discarded", en.State)
	}
	var x Index
	for _, e := range life {
		x.Apply(1, e)
	}
	if s := x.Summary(nil); s.ByState[Discarded] != 1 {
		t.Fatalf("index %+v", s.ByState)
	}
}

// A duplicate note does not change what is settled: a stale copy of an
// earlier replay does not lower a failed-again record's count.
func TestSettledIgnoresDuplicateNotes(t *testing.T) {
	var s Settled
	s.Record(ev(FailedAgain, 2, 0))
	dup := ev(FailedAgain, 1, time.Minute)
	dup.Outcome = OutcomeDuplicate
	s.Record(dup)
	s.Commit()
	if _, done := s.Check("orders/1/7", 2); !done {
		t.Fatal("a duplicate note lowered the settled replay count")
	}
}

// A discard that lands while relay outputs the replayed record it was
// meant to stop loses: the ledger says resolved, as the output does,
// whatever order the changes are read in. Against failed-again (nothing
// output) the discard stands.
func TestResolvedOutranksARacingDiscard(t *testing.T) {
	resolved := ev(Resolved, 1, 2*time.Minute)
	resolved.Outcome = OutcomeProcessed
	life := []*Event{ev(Open, 0, 0), ev(Replaying, 1, time.Minute), ev(Discarded, 1, 3*time.Minute), resolved}
	for range 20 {
		shuffled := append([]*Event{}, life...)
		rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if en := Fold(shuffled)["orders/1/7"]; en.State != Resolved {
			t.Fatalf("state %s, want resolved", en.State)
		}
		var x Index
		var s Settled
		entries := map[string][]byte{}
		for _, e := range shuffled {
			x.Apply(1, e)
			entries[e.Key()] = e.Value()
		}
		if st := x.Summary(nil).ByState; st[Resolved] != 1 {
			t.Fatalf("index %v, want resolved", st)
		}
		s.Restore(entries)
		if st, done := s.Check("orders/1/7", 1); !done || st != Resolved {
			t.Fatalf("settled %s %v, want resolved", st, done)
		}
	}
	// Nothing output: the discard stands, at the replay's count or below
	// it (a replay published between the discard's read and its write).
	for _, life := range [][]*Event{
		{ev(Replaying, 1, 0), ev(Discarded, 1, time.Minute), ev(FailedAgain, 1, 2*time.Minute)},
		{ev(Open, 0, 0), ev(Discarded, 0, time.Minute), ev(Replaying, 1, 2*time.Minute), ev(FailedAgain, 1, 3*time.Minute)},
		{ev(Open, 0, 0), ev(Discarded, 0, time.Minute), ev(Replaying, 1, 2*time.Minute)},
	} {
		var x Index
		for _, e := range life {
			x.Apply(1, e)
		}
		if en := Fold(life)["orders/1/7"]; en.State != Discarded || x.Summary(nil).ByState[Discarded] != 1 {
			t.Fatalf("state %s, index %v; want discarded", en.State, x.Summary(nil).ByState)
		}
	}
}
