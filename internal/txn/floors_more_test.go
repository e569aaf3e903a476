package txn

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// stepParker is a parker whose "release1" hands back only the first kept
// record.
type stepParker struct{ *parker }

func (s stepParker) Handle(ctx context.Context, r *Record) ([]Output, error) {
	outs, err := s.parker.Handle(ctx, r)
	if string(r.Value) == "release1" && len(s.kept) > 0 {
		s.due, s.kept = append(s.due, s.kept[0]), s.kept[1:]
	}
	return outs, err
}

func sentFor(tps []kafka.TopicPartition, partition int32) (off int64, md string, ok bool) {
	for _, tp := range tps {
		if tp.Partition == partition {
			if tp.Metadata != nil {
				md = *tp.Metadata
			}
			return int64(tp.Offset), md, true
		}
	}
	return 0, "", false
}

// Parked records handed back one per transaction: each transaction's
// commit keeps the partition's handled position, not only the first
// after it (a due record's commit must not lower the position the next
// one is raised to).
func TestFloorsDueRecordsOneByOneKeepTheHandledPosition(t *testing.T) {
	h := newHarness(t)
	h.set.MaxRecords = 2
	ph := &parker{parked: map[int32][]int64{}}
	h.handler = stepParker{ph}
	c := h.c
	err := h.run(c.assign(0, 1),
		valued(c.msg(0, 1), "park"), valued(c.msg(0, 2), "park"), // commit: 1, parked 1 and 2 below 3
		c.msg(0, 3), c.msg(0, 4), // commit: 1, parked 1 and 2 below 5
		valued(c.msg(1, 0), "release1"), // and 0/1: commit 2, parked 2 below 5
		valued(c.msg(1, 1), "release1")) // and 0/2: commit 5
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0/1", "0/2", "0/3", "0/4", "1/0", "0/1", "1/1", "0/2"}; !slices.Equal(ph.handled, want) {
		t.Fatalf("handled %v, want %v", ph.handled, want)
	}
	sent := h.prods[0].sentOffsets
	if len(sent) != 4 {
		t.Fatalf("%d commits, want 4", len(sent))
	}
	var got []string
	for _, s := range sent {
		off, md, _ := sentFor(s, 0)
		got = append(got, fmt.Sprintf("%d %s", off, md))
	}
	if want := []string{"1 [1 2]<3", "1 [1 2]<5", "2 [2]<5", "5 "}; !slices.Equal(got, want) {
		t.Errorf("partition 0 committed %q, want %q", got, want)
	}
}

// A record handed back for a partition the loop does not own any more is
// not handled: its offset is another member's to commit.
func TestFloorsDueRecordOfARevokedPartitionWaits(t *testing.T) {
	h := newHarness(t)
	ph := &parker{parked: map[int32][]int64{}}
	h.handler = ph
	c := h.c
	err := h.run(c.assign(0, 1), valued(c.msg(0, 1), "park"), c.revoke(0), valued(c.msg(1, 0), "release"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0/1", "1/0"}; !slices.Equal(ph.handled, want) {
		t.Errorf("handled %v, want %v", ph.handled, want)
	}
	sent := h.prods[0].sentOffsets
	if len(sent) != 2 {
		t.Fatalf("%d commits, want 2 (the revoke's, the shutdown's)", len(sent))
	}
	if off, _, ok := sentFor(sent[1], 0); ok {
		t.Errorf("partition 0, revoked, committed at %d", off)
	}
}

// sticky is a Floors handler with a bug: it hands back the same record
// again and again.
type sticky struct {
	rec      *Record
	released bool
	times    int
}

func (s *sticky) Handle(_ context.Context, r *Record) ([]Output, error) {
	switch {
	case r == s.rec:
		s.times++
		if s.times >= 5 {
			s.released = false // let a loop that handles it again and again end
		}
	case string(r.Value) == "park":
		s.rec = r
		return nil, nil
	case string(r.Value) == "release":
		s.released = true
	}
	return []Output{{Topic: "out", Partition: r.Partition, Value: r.Value}}, nil
}

func (s *sticky) Floor(_ TopicPartition, next int64) (int64, string) { return next, "" }
func (s *sticky) Resume(TopicPartition, int64, string) error         { return nil }
func (s *sticky) Due() []*Record {
	if s.released {
		return []*Record{s.rec}
	}
	return nil
}

// A record handed back twice in one round is handled once.
func TestFloorsDueRecordHandedBackTwiceIsHandledOnce(t *testing.T) {
	h := newHarness(t)
	s := &sticky{}
	h.handler = s
	c := h.c
	if err := h.run(c.assign(0), valued(c.msg(0, 1), "park"), valued(c.msg(0, 2), "release")); err != nil {
		t.Fatal(err)
	}
	if s.times != 1 {
		t.Errorf("the record handed back was handled %d times in one round, want 1", s.times)
	}
}

// A transaction the record just read filled is not handed a due record:
// it commits first, and the due record goes in the next.
func TestFloorsDueRecordDoesNotOverfillATransaction(t *testing.T) {
	h := newHarness(t)
	h.set.MaxRecords = 2
	ph := &parker{parked: map[int32][]int64{}}
	h.handler = ph
	c := h.c
	err := h.run(c.assign(0, 1), valued(c.msg(0, 1), "park"), c.msg(0, 2),
		c.msg(1, 0), valued(c.msg(1, 1), "release"), sleepEvent(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	sent := h.prods[0].sentOffsets
	if len(sent) != 3 {
		t.Fatalf("%d commits %v, want 3", len(sent), sent)
	}
	if _, _, ok := sentFor(sent[1], 0); ok || len(sent[1]) != 1 {
		t.Errorf("second transaction committed %v: 1/0 and 1/1 filled it, and 0/1 went in too", sent[1])
	}
}

// A partition assigned with nothing committed is resumed with no
// metadata, whatever the committed-offset fetch returned with it.
func TestFloorsNoCommittedOffsetNoMetadata(t *testing.T) {
	h := newHarness(t)
	ph := &parker{parked: map[int32][]int64{}}
	h.handler = ph
	c := h.c
	c.metadata = map[int32]string{0: "stale"}
	if err := h.run(c.assign(0), c.msg(0, 0)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"0@-1001:"}; !slices.Equal(ph.resumed, want) {
		t.Errorf("resumed %v, want %v", ph.resumed, want)
	}
}
