package keyorder

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

var (
	p0  = Part{Topic: "orders", Partition: 0}
	skA = StateKey("orders", 0, []byte("A"))
	skB = StateKey("orders", 0, []byte("B"))
	now = time.Date(2026, 7, 31, 9, 10, 0, 0, time.UTC)
	lim = Limits{Records: 100, Bytes: 1 << 20, Wait: time.Minute, Metadata: DefaultMetadata}
)

// blocked is a key whose head (seq 0) waits in a tier, with the given
// offsets parked behind it (seq 1, 2, ...).
func blocked(offsets ...int64) *State {
	s := &State{Next: 0, Tail: 1, NotBefore: now.Add(30 * time.Second), Head: "orders/0/10"}
	for _, o := range offsets {
		s, _ = Park(s, o, time.Time{})
	}
	return s
}

func mustEncode(t *testing.T, p Parked) string {
	t.Helper()
	md, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// A state with parked records is version 2, which a relay without parking
// skips instead of misreading (it would take the parked records for
// copies in the tier, which are not there); one without is version 1.
func TestParkedStateIsVersion2(t *testing.T) {
	for _, c := range []struct {
		s    *State
		want int
	}{{blocked(), 1}, {blocked(11), 2}} {
		var v versioned
		if err := json.Unmarshal(c.s.Encode(), &v); err != nil || v.V != c.want {
			t.Errorf("%+v encoded as version %d (%v), want %d", c.s, v.V, err, c.want)
		}
	}
}

// A handled head that was parked leaves the key's parked slots; the next
// parked one is first, and its turn has come.
func TestAdvancePastAParkedHead(t *testing.T) {
	s := Advance(blocked(11, 12)) // the head from the tier: seq 1 (11) is next
	if s.Next != 1 || len(s.Parked) != 2 {
		t.Fatalf("after the head: %+v", s)
	}
	s = Advance(s) // 11, parked, handled at its turn
	if s.Next != 2 || !slices.Equal(s.Parked, []Slot{{Seq: 2, Offset: 12}}) {
		t.Fatalf("after 11: %+v, want 12 alone parked, at its turn", s)
	}
}

// Abort takes a key back to its state before the transaction, however
// many times the transaction changed it, parked slots included.
func TestAbortRestoresTheStateBeforeTheTransaction(t *testing.T) {
	var k Set[string]
	k.Put(skA, blocked())
	k.Commit()
	s1 := blocked(11)
	k.Put(skA, s1)
	k.Keep(p0, 11, "A2", 10)
	s2, _ := Park(s1, 12, time.Time{})
	k.Put(skA, s2)
	k.Abort()
	if s := k.Get(skA); s == nil || s.Tail != 1 || len(s.Parked) != 0 {
		t.Fatalf("state after the abort %+v, want the committed one (tail 1, nothing parked)", s)
	}
	for _, o := range []int64{11, 12} {
		if _, _, ok := k.SlotOf(p0, o); ok {
			t.Errorf("%d still parked after the abort", o)
		}
	}
}

// Key states forgotten in an open transaction (their partition revoked
// while its transaction's outcome is unknown) do not come back when that
// transaction aborts: their next owner has them.
func TestForgottenStatesStayForgottenOnAbort(t *testing.T) {
	var k Set[string]
	k.Put(skA, blocked())
	k.Commit()
	k.Put(skA, blocked(11))
	k.Forget([]int32{0})
	k.Abort()
	if s := k.Get(skA); s != nil {
		t.Fatalf("state of a forgotten partition's key back after the abort: %+v", s)
	}
	if _, _, ok := k.SlotOf(p0, 11); ok {
		t.Fatal("a forgotten partition's record parked again after the abort")
	}
}

// Every parked record of a partition is in its floor's parked set, and
// known as parked, whichever key parks it; the set is ascending.
func TestFloorListsEveryParkedOffset(t *testing.T) {
	var k Set[string]
	a := []int64{11, 13, 14, 17, 18, 19, 23, 24, 29, 31, 32}
	b := []int64{12, 20, 21, 30}
	k.Put(skA, blocked(a...))
	k.Put(skB, blocked(b...))
	want := slices.Sorted(slices.Values(append(slices.Clone(a), b...)))
	for i, o := range want {
		if _, _, ok := k.SlotOf(p0, o); !ok {
			t.Errorf("%d (#%d) not known as parked", o, i)
		}
	}
	off, md := k.Floor(p0, 40)
	p, ok, err := Decode(off, md)
	if off != 11 || !ok || err != nil || !slices.Equal(p.Offsets, want) || p.Hi != 40 {
		t.Fatalf("floor %d %q: %+v %v %v, want 11 with %v parked up to 40", off, md, p, ok, err, want)
	}
	if st := k.Stats(); st.Behind[p0] != 40-11 {
		t.Errorf("behind %d, want %d (the handled position less the lowest parked offset)", st.Behind[p0], 40-11)
	}
}

// A revoked partition's parked records leave memory, and its counts.
func TestForgetLetsTheParkedRecordsGo(t *testing.T) {
	var k Set[string]
	k.Put(skA, blocked(11, 12))
	k.Keep(p0, 11, "A2", 100)
	k.Keep(p0, 12, "A3", 50)
	k.Keep(Part{Topic: "orders", Partition: 1}, 3, "Z", 7)
	k.Commit()
	k.Forget([]int32{0})
	if n, b := k.Held(); n != 1 || b != 7 {
		t.Fatalf("held %d records, %d bytes after the revoke, want 1 and 7 (partition 1's)", n, b)
	}
	if st := k.Stats(); st.Records != 1 || st.Bytes != 7 {
		t.Fatalf("stats %+v", st)
	}
}

// A record kept again (read again while still in memory) counts once.
func TestKeepAgainCountsOnce(t *testing.T) {
	var k Set[string]
	k.Put(skA, blocked(11))
	k.Keep(p0, 11, "A2", 100)
	k.Keep(p0, 11, "A2 read again", 100)
	if n, b := k.Held(); n != 1 || b != 100 {
		t.Fatalf("held %d records, %d bytes, want 1 and 100", n, b)
	}
	if rec, ok := k.Kept(p0, 11); !ok || rec != "A2 read again" {
		t.Fatalf("kept %q %v", rec, ok)
	}
}

// Each limit refuses a park on its own, and says so.
func TestCanParkLimits(t *testing.T) {
	var k Set[string]
	k.Put(skA, blocked())
	due := now.Add(30 * time.Second)
	for _, c := range []struct {
		name string
		lim  Limits
		size int64
		due  time.Time
		why  string
	}{
		{"within every limit", lim, 100, due, ""},
		{"off", Limits{}, 100, due, "off"},
		{"the record alone is over the bytes", Limits{Records: 100, Bytes: 99, Wait: time.Minute, Metadata: DefaultMetadata}, 100, due, "bytes"},
		{"the head due later than the wait", lim, 100, now.Add(5 * time.Minute), "wait"},
		{"the parked set over the metadata", Limits{Records: 100, Bytes: 1 << 20, Wait: time.Minute, Metadata: len(Prefix) + 1}, 100, due, "metadata"},
		// The defaults meet here: a wait of 30 s and a first tier of 30 s.
		// A head due exactly the wait away parks its followers; a
		// nanosecond later, it does not (a review's mutation of > into >=
		// went uncaught).
		{"the head due exactly the wait away", Limits{Records: 100, Bytes: 1 << 20, Wait: 30 * time.Second, Metadata: DefaultMetadata}, 100, now.Add(30 * time.Second), ""},
		{"the head due just past the wait", Limits{Records: 100, Bytes: 1 << 20, Wait: 30 * time.Second, Metadata: DefaultMetadata}, 100, now.Add(30*time.Second + time.Nanosecond), "wait"},
		{"the record exactly at the bytes", Limits{Records: 100, Bytes: 100, Wait: time.Minute, Metadata: DefaultMetadata}, 100, due, ""},
		{"the last record the count allows", Limits{Records: 1, Bytes: 1 << 20, Wait: time.Minute, Metadata: DefaultMetadata}, 100, due, ""},
	} {
		if ok, why := k.CanPark(c.lim, p0, 11, c.size, c.due, now); ok != (c.why == "") || why != c.why {
			t.Errorf("%s: %v %q, want %q", c.name, ok, why, c.why)
		}
	}
	k.Keep(p0, 11, "A2", 100)
	if ok, why := k.CanPark(Limits{Records: 100, Bytes: 150, Wait: time.Minute, Metadata: DefaultMetadata}, p0, 12, 60, due, now); ok || why != "bytes" {
		t.Errorf("100 bytes held and 60 more, limit 150: %v %q, want bytes", ok, why)
	}
}

// spread is a parked set of n offsets from 1000, 200 apart (two bytes each
// encoded), handled up to just after the last.
func spread(n int) Parked {
	p := Parked{}
	for i := range n {
		p.Offsets = append(p.Offsets, 1000+200*int64(i))
	}
	p.Hi = p.Offsets[n-1] + 1
	return p
}

// While a partition is read again from a commit with a parked set, a park
// is judged by the set its floor would commit: the committed set's parked
// offsets not read yet are in it.
func TestCanParkCountsTheCommittedSet(t *testing.T) {
	var k Set[string]
	w := spread(100)
	if err := k.Resume(p0, 1000, mustEncode(t, w)); err != nil {
		t.Fatal(err)
	}
	with := EncodedLen(Parked{Offsets: slices.Sorted(slices.Values(append(slices.Clone(w.Offsets), 1001))), Hi: w.Hi})
	l := lim
	l.Metadata = with - 1
	if ok, why := k.CanPark(l, p0, 1001, 10, now, now); ok || why != "metadata" {
		t.Fatalf("park beside a committed set of %d offsets, metadata limit %d: %v %q, want metadata", len(w.Offsets), l.Metadata, ok, why)
	}
}

// Once a partition is read past its committed set, the set is forgotten:
// it no longer counts in what a park would commit, nor is anything
// skipped.
func TestReadPastTheCommittedSet(t *testing.T) {
	var k Set[string]
	w := spread(100)
	if err := k.Resume(p0, 1000, mustEncode(t, w)); err != nil {
		t.Fatal(err)
	}
	for o := w.Offsets[0]; o < w.Hi; o++ {
		if k.Skip(p0, o) != w.Settled(o) {
			t.Fatalf("offset %d: skip %v, settled %v", o, k.Skip(p0, o), w.Settled(o))
		}
	}
	if k.Skip(p0, w.Hi) {
		t.Fatalf("%d, the committed set's handled position, skipped", w.Hi)
	}
	l := lim
	l.Metadata = EncodedLen(Parked{Offsets: []int64{w.Hi}, Hi: w.Hi + 1})
	if ok, why := k.CanPark(l, p0, w.Hi, 10, now, now); !ok {
		t.Fatalf("park of %d, read past the committed set: refused (%s)", w.Hi, why)
	}
	if off, md := k.Floor(p0, w.Hi+1); off != w.Hi+1 || md != "" {
		t.Fatalf("floor %d %q, want %d and nothing parked", off, md, w.Hi+1)
	}
}

// A partition read again from a commit without a parked set skips
// nothing, whatever an earlier commit it was read from said.
func TestResumeWithoutAParkedSetForgetsTheEarlierOne(t *testing.T) {
	var k Set[string]
	if err := k.Resume(p0, 11, mustEncode(t, Parked{Offsets: []int64{11}, Hi: 20})); err != nil {
		t.Fatal(err)
	}
	if err := k.Resume(p0, 11, ""); err != nil {
		t.Fatal(err)
	}
	for o := int64(11); o < 20; o++ {
		if k.Skip(p0, o) {
			t.Fatalf("%d skipped after a resume with nothing parked", o)
		}
	}
}

// A committed set's parked offset that the transaction's next has reached
// but not read (next is that offset) is parked still in the floor.
func TestFloorKeepsACommittedParkedOffsetAtNext(t *testing.T) {
	var k Set[string]
	if err := k.Resume(p0, 11, mustEncode(t, Parked{Offsets: []int64{11, 15}, Hi: 20})); err != nil {
		t.Fatal(err)
	}
	off, md := k.Floor(p0, 15)
	p, ok, err := Decode(off, md)
	if !ok || err != nil || !p.Holds(15) || off > 15 {
		t.Fatalf("floor %d %q (%+v %v %v): 15, parked and not read again yet, must stay parked", off, md, p, ok, err)
	}
}

// A parked record is handed back once its turn has come and it is in
// memory: not before it is read again, whichever comes first.
func TestReadyWhenAtItsTurnAndInMemory(t *testing.T) {
	var k Set[string]
	s := Advance(blocked(11, 12)) // the head handled: 11 is at its turn
	k.Put(skA, s)
	if r := k.Ready(); len(r) != 0 {
		t.Fatalf("ready %q before 11 is in memory", r)
	}
	k.Keep(p0, 12, "A3", 10)
	if r := k.Ready(); len(r) != 0 {
		t.Fatalf("ready %q: 12 is not at its turn", r)
	}
	k.Keep(p0, 11, "A2", 10)
	if r := k.Ready(); !slices.Equal(r, []string{"A2"}) {
		t.Fatalf("ready %q, want A2", r)
	}
	// The partition is rewound: its records are read again, so memory
	// lets them go, and nothing is ready until 11 is kept again.
	if err := k.Resume(p0, 11, mustEncode(t, Parked{Offsets: []int64{11, 12}, Hi: 13})); err != nil {
		t.Fatal(err)
	}
	if r := k.Ready(); len(r) != 0 {
		t.Fatalf("ready %q after the rewind, before 11 is read again", r)
	}
	if n, _ := k.Held(); n != 0 {
		t.Fatalf("%d records held after the rewind", n)
	}
	k.Keep(p0, 11, "A2 again", 10)
	if r := k.Ready(); !slices.Equal(r, []string{"A2 again"}) {
		t.Fatalf("ready %q, want A2 again", r)
	}
}

// A revoked partition's committed set goes with it: nothing of it is
// skipped, nor in its floor, until it is read again (Resume).
func TestForgetDropsTheCommittedSet(t *testing.T) {
	var k Set[string]
	if err := k.Resume(p0, 11, mustEncode(t, Parked{Offsets: []int64{11}, Hi: 20})); err != nil {
		t.Fatal(err)
	}
	k.Forget([]int32{0})
	if k.Skip(p0, 12) {
		t.Fatal("12 skipped after its partition was revoked")
	}
	if off, md := k.Floor(p0, 12); off != 12 || md != "" {
		t.Fatalf("floor %d %q, want 12", off, md)
	}
}

// A key state that parks offsets on both sides of the offset its
// partition is read again from, with no committed set to say which
// records are settled (the partition committed without one, by a relay
// without parking): the one below is never read again (lost: the floor
// does not go back to it), and the one above is not read yet, so the
// floor stays below it and claims nothing between as settled, until it
// is read and kept.
func TestFloorWithAParkedOffsetAboveNext(t *testing.T) {
	var k Set[string]
	if err := k.Restore(map[string][]byte{skA: blocked(11, 15).Encode()}); err != nil {
		t.Fatal(err)
	}
	if err := k.Resume(p0, 12, ""); err != nil {
		t.Fatal(err)
	}
	if off, md := k.Floor(p0, 13); off != 13 || md != "" {
		t.Fatalf("floor %d %q, want 13: 11 is below the commit, 15 not read yet", off, md)
	}
	k.Look(p0)
	if lost := k.TakeLost(p0); len(lost) != 1 || lost[0].Offset != 11 {
		t.Fatalf("lost %+v, want 11 (below the offset read again from)", lost)
	}
	k.Passed(p0, 15)
	k.Keep(p0, 15, "A3", 1)
	off, md := k.Floor(p0, 16)
	p, ok, err := Decode(off, md)
	if off != 15 || !ok || err != nil || !slices.Equal(p.Offsets, []int64{15}) || p.Hi != 16 {
		t.Fatalf("floor %d %q: %+v %v %v, want 15 parked up to 16", off, md, p, ok, err)
	}
}

// A parked record has waited behind its key's head since it was parked or
// since the head became the head, whichever is later; a resolved head
// leaves no "since" behind, and a slot parked without a time has none.
func TestWaitedBehindTheHead(t *testing.T) {
	s, _ := Park(&State{Next: 0, Tail: 1, Head: "orders/0/10", HeadSince: now.Add(-time.Hour).UnixMilli()}, 11, now.Add(-10*time.Minute))
	if d, ok := s.Waited(s.Parked[0], now); !ok || d != 10*time.Minute {
		t.Fatalf("parked after the head: waited %s %v, want 10m", d, ok)
	}
	s.HeadSince = now.Add(-time.Minute).UnixMilli()
	if d, ok := s.Waited(s.Parked[0], now); !ok || d != time.Minute {
		t.Fatalf("a head newer than the park: waited %s %v, want 1m", d, ok)
	}
	if a := Advance(s); a.HeadSince != 0 || a.Head != "" {
		t.Fatalf("advanced: %+v, want no head and no since", a)
	}
	u, _ := Park(&State{Tail: 1}, 12, time.Time{})
	if d, ok := u.Waited(u.Parked[0], now); ok || u.Parked[0].At != 0 {
		t.Fatalf("no times: waited %s %v, slot %+v", d, ok, u.Parked[0])
	}
}
