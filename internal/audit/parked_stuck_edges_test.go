package audit

import (
	"testing"
	"time"

	"relay/internal/keyorder"
)

// Regression (found by mutation testing): when a head settles, keyorder.Advance clears head and headSince
// until the next record takes its turn (a tier copy not read yet, a
// parked record not handed back yet, a relay restarting): the audit then
// measures a parked record's wait from when it was parked, across every
// head before, and calls it stuck ("parked behind \"\""), though each
// head settled within its budget and none is at the head now.
func TestParkedBetweenHeadsIsNotStuck(t *testing.T) {
	s := parkedScan(t, 3)
	ago := func(d time.Duration) int64 { return s.o.Now.Add(-d).UnixMilli() }
	// 3, parked 170 min ago, waits behind its key's third head in a row,
	// the head since 50 min; the one before it (seq 2) is a tier copy.
	behind := &keyorder.State{Next: 1, Tail: 4, Head: "orders/0/2", HeadSince: ago(50 * time.Minute),
		Parked: []keyorder.Slot{{Seq: 3, Offset: 3, At: ago(170 * time.Minute)}}}
	sk := keyorder.StateKey("orders", 0, []byte("a"))
	keyStateRecord(s, sk, behind.Encode())
	keyStateRecord(s, sk, keyorder.Advance(behind).Encode()) // the head settles
	s.parkedTooLong()
	if st := stuckOf(s); len(st) != 0 {
		t.Fatalf("stuck %v: a record waiting for its turn, behind no head", st)
	}
}

// Regression (found by mutation testing): parkedTooLong judges every slot the commit parks, in the window or
// not, though the audit judges only the window's offsets (a copy in a
// tier is stuck only for an offset of the window): an audit of
// yesterday's window reports today's parked record stuck, in a partition
// whose counts do not hold it.
func TestParkedOutsideTheWindowIsNotJudged(t *testing.T) {
	s := testScan(t, nil) // the window is [0, 10)
	pt := s.batch[0]
	pt.committed = 12
	pt.parked = keyorder.Parked{Offsets: []int64{12}, Hi: 14}
	old := s.o.Now.Add(-3 * time.Hour).UnixMilli()
	keyStateRecord(s, keyorder.StateKey("orders", 0, []byte("a")), (&keyorder.State{Tail: 2, Head: "orders/0/11", HeadSince: old,
		Parked: []keyorder.Slot{{Seq: 1, Offset: 12, At: old}}}).Encode())
	s.parkedTooLong()
	s.judge()
	if st := stuckOf(s); len(st) != 0 || s.rep.Partitions[0].Stuck != 0 {
		t.Fatalf("stuck %v, partition %+v: offset 12 is outside the window [0, 10)", st, s.rep.Partitions[0])
	}
}
