package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/keyorder"
)

// keyStateRecord feeds s a state-topic record of key sk, as read beside
// the ledger; a nil value is a tombstone.
func keyStateRecord(s *scan, sk string, v []byte) {
	s.ledgerRecord(&kafka.Message{Key: []byte(sk), Value: v})
}

func stuckOf(s *scan) []Finding {
	var out []Finding
	for _, f := range s.rep.Findings {
		if f.Kind == KindStuck {
			out = append(out, f)
		}
	}
	return out
}

// parkedScan is testScan whose commit (at 3) parks offsets, with Now on
// a whole second so that waits are exact.
func parkedScan(t *testing.T, parked ...int64) *scan {
	t.Helper()
	s := testScan(t, nil)
	s.o.Now = s.o.Now.Truncate(time.Second)
	s.batch[0].committed = 3
	s.batch[0].parked = keyorder.Parked{Offsets: parked, Hi: 10}
	return s
}

// The bound is a head's life (the configuration's, a minute here) plus
// --stuck-after (an hour): a record that waited exactly that long is not
// stuck yet, one that waited a millisecond more is, and one that waited
// only --stuck-after and a little is not.
func TestParkedStuckBound(t *testing.T) {
	bound := DefaultStuckAfter(testScan(t, nil).cfg) + time.Hour
	for _, c := range []struct {
		waited time.Duration
		stuck  bool
	}{{bound, false}, {bound + time.Millisecond, true}, {time.Hour + 30*time.Second, false}} {
		s := parkedScan(t, 3)
		since := s.o.Now.Add(-c.waited).UnixMilli()
		keyStateRecord(s, keyorder.StateKey("orders", 0, []byte("a")), (&keyorder.State{Tail: 2, Head: "orders/0/1", HeadSince: since,
			Parked: []keyorder.Slot{{Seq: 1, Offset: 3, At: since}}}).Encode())
		s.parkedTooLong()
		if got := len(stuckOf(s)) == 1; got != c.stuck {
			t.Errorf("waited %s (bound %s): stuck %v, want %v", c.waited, bound, got, c.stuck)
		}
	}
}

// A record parked at the cut whose copy also waits in a tier behind the
// same head (unparked since) is one record stuck, counted once, in its
// partition and in the totals.
func TestParkedStuckOnceBesideItsCopy(t *testing.T) {
	s := parkedScan(t, 3)
	now := s.o.Now
	copy3 := []kafka.Header{h(envelope.FailureID, envelope.ID("orders", 0, 3)), h(envelope.SourceTopic, "orders"), h(envelope.SourcePartition, "0"),
		h(envelope.SourceOffset, "3"), printOf(3), h(envelope.ErrorCode, keyBlocked), h(envelope.KeyHead, "orders/0/1"),
		h(envelope.FirstFailedAt, now.Add(-150*time.Minute).UTC().Format(envelope.TimeFormat)), h(envelope.NotBefore, now.UTC().Format(envelope.TimeFormat))}
	s.envelopeRecord(derived{"orders.retry.5s", roleTier})(msg("orders.retry.5s", 3, nil, nil, copy3...))
	since := now.Add(-3 * time.Hour).UnixMilli()
	keyStateRecord(s, keyorder.StateKey("orders", 0, []byte("a")), (&keyorder.State{Tail: 2, Head: "orders/0/1", HeadSince: since,
		Parked: []keyorder.Slot{{Seq: 1, Offset: 3, At: since}}}).Encode())
	s.parkedTooLong()
	s.judge()
	if st := stuckOf(s); len(st) != 1 || s.rep.Totals[KindStuck] != 1 || s.rep.Partitions[0].Stuck != 1 {
		t.Fatalf("stuck %v, total %d, partition %d: want offset 3 stuck once", st, s.rep.Totals[KindStuck], s.rep.Partitions[0].Stuck)
	}
}

// A state the audit cannot read — of a newer format, unreadable — stands
// for the key's latest state all the same: the parked slots of the one
// before it are dropped, not judged; a state of a partition outside the
// batch is not the batch's. None of them stops the audit.
func TestParkedStatesTheAuditCannotRead(t *testing.T) {
	s := parkedScan(t, 3, 5, 6)
	old := s.o.Now.Add(-3 * time.Hour).UnixMilli()
	blocked := func(off int64) []byte {
		return (&keyorder.State{Tail: 2, Head: "orders/0/1", HeadSince: old, Parked: []keyorder.Slot{{Seq: 1, Offset: off, At: old}}}).Encode()
	}
	a, b := keyorder.StateKey("orders", 0, []byte("a")), keyorder.StateKey("orders", 0, []byte("b"))
	keyStateRecord(s, a, blocked(3))
	keyStateRecord(s, a, []byte(`{"v":3,"next":0,"tail":2,"parked":"a newer shape"}`))
	keyStateRecord(s, b, blocked(5))
	keyStateRecord(s, b, []byte(`{"v":2,`))
	keyStateRecord(s, keyorder.StateKey("orders", 1, []byte("a")), blocked(6))
	s.parkedTooLong()
	s.judge()
	if st := stuckOf(s); len(st) != 0 || s.rep.Partitions[0].Stuck != 0 {
		t.Fatalf("stuck %v: want none", st)
	}
}

// The detail quotes the head (a forged one cannot forge a line of the
// report) and says since when the record waited behind it.
func TestParkedStuckDetail(t *testing.T) {
	s := parkedScan(t, 3)
	since := s.o.Now.Add(-3 * time.Hour)
	keyStateRecord(s, keyorder.StateKey("orders", 0, []byte("a")), (&keyorder.State{Tail: 2, Head: "orders/0/1\nFAKE FINDING", HeadSince: since.UnixMilli(),
		Parked: []keyorder.Slot{{Seq: 1, Offset: 3, At: since.Add(-time.Hour).UnixMilli()}}}).Encode())
	s.parkedTooLong()
	st := stuckOf(s)
	if len(st) != 1 || strings.Contains(st[0].Detail, "\nFAKE") || !strings.Contains(st[0].Detail, `"orders/0/1\nFAKE FINDING"`) ||
		!strings.Contains(st[0].Detail, "since "+since.UTC().Format(time.RFC3339)+" (3h0m0s)") {
		t.Fatalf("stuck %v: want the head quoted, waited since %s", st, since.UTC().Format(time.RFC3339))
	}
}

// Each key's state is judged against its own partition's commit: a
// record of partition 1 is stuck there, by partition 1's parked set.
func TestParkedStuckInItsOwnPartition(t *testing.T) {
	s := parkedScan(t, 3)
	p1 := &part{p: 1, lo: 0, hi: 10, committed: 4, slots: make([]slot, 10), fps: make([]uint16, 10),
		parked: keyorder.Parked{Offsets: []int64{4}, Hi: 6}}
	s.parts[1], s.batch[1] = p1, p1
	old := s.o.Now.Add(-3 * time.Hour).UnixMilli()
	keyStateRecord(s, keyorder.StateKey("orders", 1, []byte("a")), (&keyorder.State{Tail: 2, Head: "orders/1/2", HeadSince: old,
		Parked: []keyorder.Slot{{Seq: 1, Offset: 4, At: old}}}).Encode())
	s.parkedTooLong()
	s.judge()
	st := stuckOf(s)
	if len(st) != 1 || st[0].Source.Partition != 1 || st[0].Source.Offset != 4 || s.rep.Partitions[0].Stuck != 0 || s.rep.Partitions[1].Stuck != 1 {
		t.Fatalf("stuck %v, partitions %+v %+v: want orders/1/4 stuck, in partition 1", st, s.rep.Partitions[0], s.rep.Partitions[1])
	}
}
