package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/keyorder"
)

// The commit's parked set, as the audit reads it: committed at 3 with 3
// and 5 parked up to 8. 0 to 2 are consumed; 4, 6 and 7, settled above
// the committed offset, are judged as consumed (6, with no end state, is
// lost); 3 and 5 are parked, in flight; 8 and 9 are not consumed yet.
func TestJudgeTheCommittedParkedSet(t *testing.T) {
	s := testScan(t, nil)
	pt := s.batch[0]
	pt.committed = 3
	pt.parked = keyorder.Parked{Offsets: []int64{3, 5}, Hi: 8}
	for _, off := range []int64{0, 1, 2, 4, 7} {
		s.outputRecord(msg("orders.valid", off, nil, nil, h(envelope.MessageID, envelope.ID("orders", 0, off)), printOf(off)))
	}
	s.judge()
	pr := s.rep.Partitions[0]
	if pr.Processed != 5 || pr.Parked != 2 || pr.Lost != 1 || pr.Behind != 2 || pr.Duplicated != 0 {
		t.Fatalf("%+v: want 5 processed (0-2, 4, 7), 2 parked (3, 5), 1 lost (6), 2 not consumed (8, 9)", pr)
	}
	if sum := s.rep.sum(); sum.Parked != 2 {
		t.Errorf("summary parked %d, want 2", sum.Parked)
	}
}

// A parked record whose key's head never settles is stuck once it has
// waited behind that head (since it was parked, or since the head became
// the head, whichever is later) longer than a head can take plus
// --stuck-after: an hour in testScan plus a minute of the configuration's
// floor. A record that waited less, one the commit no longer parks, a key
// freed since (its tombstone) and another source's key are not.
func TestParkedBehindAHeadThatNeverSettles(t *testing.T) {
	s := testScan(t, nil)
	pt := s.batch[0]
	pt.committed = 3
	pt.parked = keyorder.Parked{Offsets: []int64{3, 5, 6, 8}, Hi: 10}
	now := s.o.Now
	ago := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	state := func(sk string, st *keyorder.State) {
		var v []byte
		if st != nil {
			v = st.Encode()
		}
		s.ledgerRecord(&kafka.Message{Key: []byte(sk), Value: v})
	}
	a := keyorder.StateKey("orders", 0, []byte("a"))
	state(a, &keyorder.State{Next: 0, Tail: 3, Head: "orders/0/1", HeadSince: ago(3 * time.Hour),
		Parked: []keyorder.Slot{{Seq: 1, Offset: 3, At: ago(3 * time.Hour)}, {Seq: 2, Offset: 5, At: ago(30 * time.Minute)}, {Seq: 3, Offset: 7, At: ago(3 * time.Hour)}}})
	// A new head since 6 was parked: 6 waits behind it from then.
	b := keyorder.StateKey("orders", 0, []byte("b"))
	state(b, &keyorder.State{Next: 0, Tail: 2, Head: "orders/0/4", HeadSince: ago(20 * time.Minute),
		Parked: []keyorder.Slot{{Seq: 1, Offset: 6, At: ago(3 * time.Hour)}}})
	c := keyorder.StateKey("orders", 0, []byte("c"))
	state(c, &keyorder.State{Next: 0, Tail: 2, Head: "orders/0/2", HeadSince: ago(3 * time.Hour),
		Parked: []keyorder.Slot{{Seq: 1, Offset: 8, At: ago(3 * time.Hour)}}})
	state(c, nil)
	state(keyorder.StateKey("payments", 0, []byte("a")), &keyorder.State{Next: 0, Tail: 2, HeadSince: ago(3 * time.Hour),
		Parked: []keyorder.Slot{{Seq: 1, Offset: 8, At: ago(3 * time.Hour)}}})
	s.parkedTooLong()
	s.judge()
	var stuck []Finding
	for _, f := range s.rep.Findings {
		if f.Kind == KindStuck {
			stuck = append(stuck, f)
		}
	}
	if s.rep.Totals[KindStuck] != 1 || len(stuck) != 1 || stuck[0].Source.Offset != 3 ||
		!strings.Contains(stuck[0].Detail, "orders/0/1") || s.rep.Partitions[0].Stuck != 1 || s.rep.Partitions[0].Parked != 4 {
		t.Fatalf("stuck %v, %+v: want offset 3 alone stuck (parked 3 h behind orders/0/1), still counted parked", stuck, s.rep.Partitions[0])
	}
	if s.keys != nil {
		t.Error("the key states are kept after parkedTooLong")
	}
}
