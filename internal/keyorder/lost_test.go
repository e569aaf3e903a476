package keyorder

import "testing"

// A lost record at its key's turn passes the turn on at once; one further
// back is passed over when its turn comes; a key with nothing but lost
// records left is free.
func TestLoseAndAdvance(t *testing.T) {
	s := &State{Next: 0, Tail: 4, Head: "h", Parked: []Slot{{Seq: 1, Offset: 11}, {Seq: 2, Offset: 12}, {Seq: 3, Offset: 13}}}
	l := Lose(s, 2)
	if l.Next != 0 || !l.Parked[1].Lost || l.Parked[0].Lost || l.Parked[2].Lost || s.Parked[1].Lost {
		t.Fatalf("lose seq 2: %+v (was %+v)", l, s)
	}
	if f, ok := l.FirstParked(); !ok || f.Seq != 1 {
		t.Fatalf("first parked %+v %v", f, ok)
	}
	a := Advance(l) // the head settles: seq 1's turn
	if a.Next != 1 || len(a.Parked) != 3 {
		t.Fatalf("advance: %+v", a)
	}
	a = Advance(a) // seq 1 handled: 2 is lost, 3's turn
	if a.Next != 3 || len(a.Parked) != 1 || a.Parked[0].Seq != 3 {
		t.Fatalf("advance past the lost one: %+v", a)
	}
	if got := Lose(a, 3); got != nil {
		t.Fatalf("the last record lost at its turn: %+v, want the key free", got)
	}
	b := Lose(&State{Next: 1, Tail: 3, Parked: []Slot{{Seq: 1, Offset: 11}, {Seq: 2, Offset: 12}}}, 1)
	if b.Next != 2 || len(b.Parked) != 1 || b.Parked[0].Seq != 2 {
		t.Fatalf("lost at its turn: %+v", b)
	}
	if _, ok := (&State{Parked: []Slot{{Seq: 1, Lost: true}}}).FirstParked(); ok {
		t.Fatal("a lost slot parks nothing")
	}
}

// A lost slot parks no offset: neither the slot index nor the floor
// counts it, and it survives the state's encoding.
func TestLostSlotParksNoOffset(t *testing.T) {
	var k Set[string]
	p := Part{Topic: "t", Partition: 0}
	sk := StateKey("t", 0, []byte("k"))
	k.Put(sk, &State{Next: 0, Tail: 3, Head: "h", Parked: []Slot{{Seq: 1, Offset: 5, Lost: true}, {Seq: 2, Offset: 7}}})
	if _, _, ok := k.SlotOf(p, 5); ok {
		t.Fatal("a lost slot is indexed")
	}
	if off, _ := k.Floor(p, 9); off != 7 {
		t.Fatalf("floor %d, want 7", off)
	}
	st, newer, err := DecodeState(sk, k.Get(sk).Encode())
	if err != nil || newer != nil || !st.Parked[0].Lost || st.Parked[1].Lost {
		t.Fatalf("decoded %+v %v %v", st, newer, err)
	}
}

// A revoked partition's parked records found gone are forgotten with it:
// no carrier is handed out for a partition this member no longer owns.
func TestForgetDropsWhatWasFoundGone(t *testing.T) {
	var k Set[string]
	if err := k.Restore(map[string][]byte{skA: blocked(11, 13).Encode()}); err != nil {
		t.Fatal(err)
	}
	if err := k.Resume(p0, -1001, ""); err != nil {
		t.Fatal(err)
	}
	k.Passed(p0, 20)
	if len(k.LostParts()) != 1 {
		t.Fatalf("lost parts %v", k.LostParts())
	}
	k.Forget([]int32{0})
	if lp := k.LostParts(); len(lp) != 0 {
		t.Errorf("after Forget: LostParts %v, dropped %v", lp, k.gone.dropped)
	}
}
