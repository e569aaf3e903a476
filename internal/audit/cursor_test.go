package audit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// The cursor stops at the first record of the window not judged final:
// one in a tier holds it, and so does one not consumed yet; one reported
// stuck does not (it was reported, and is judged again no more); with
// every record final it is the window's end.
func TestCursorStopsAtTheFirstInFlight(t *testing.T) {
	for _, c := range []struct {
		name      string
		committed int64
		set       func([]slot)
		want      int64
	}{
		{"all processed", 10, func(sl []slot) {}, 10},
		{"one in a tier", 10, func(sl []slot) { sl[4] |= tierFlight }, 4},
		{"in a tier and stuck", 10, func(sl []slot) { sl[4] |= tierFlight | stuck; sl[6] |= replFlight }, 6},
		{"not consumed from 7", 7, func(sl []slot) {}, 7},
		{"a lost one does not hold it", 10, func(sl []slot) { sl[2] = present }, 10},
	} {
		s := testScan(t, nil)
		pt := s.batch[0]
		pt.committed = c.committed
		for off := range pt.slots {
			if c.name != "a lost one does not hold it" || off != 2 {
				pt.slots[off].add(outShift)
			}
		}
		c.set(pt.slots)
		s.judge()
		if pt.cursor != c.want || s.rep.Partitions[0].Cursor != c.want {
			t.Errorf("%s: cursor %d (reported %d), want %d", c.name, pt.cursor, s.rep.Partitions[0].Cursor, c.want)
		}
	}
}

// The cursor is read whole or not at all; a partition without one is
// absent (it starts at the log's start).
func TestTakeCursors(t *testing.T) {
	src := "orders"
	at := func(p int32, off int64, err error) kafka.TopicPartition {
		return kafka.TopicPartition{Topic: &src, Partition: p, Offset: kafka.Offset(off), Error: err}
	}
	if _, err := takeCursors(nil, errors.New("coordinator not available"), "relay.audit"); err == nil || !strings.Contains(err.Error(), "relay.audit") {
		t.Fatalf("the answer's error: %v", err)
	}
	if _, err := takeCursors([]kafka.TopicPartition{at(0, 5, nil), at(1, 0, errors.New("unstable"))}, nil, "relay.audit"); err == nil {
		t.Fatal("a partition's error taken")
	}
	got, err := takeCursors([]kafka.TopicPartition{at(0, 5, nil), at(1, -1001, nil)}, nil, "relay.audit")
	if err != nil || len(got) != 1 || got[0] != 5 {
		t.Fatalf("cursors %v, %v; want partition 0 at 5 only", got, err)
	}
}

// --cursor takes no window of its own; --from only starts a partition
// without a cursor.
func TestCursorTakesNoWindow(t *testing.T) {
	for _, l := range []Line{{To: "1h"}, {FromOffsets: "0:1"}, {ToOffsets: "0:9"}} {
		l.MaxMemory, l.Progress = "96MiB", "none"
		o := &Options{Source: "orders", Partition: -1, Cursor: true}
		if err := l.Resolve(o, nil, time.Now()); err == nil || !strings.Contains(err.Error(), "--cursor") {
			t.Errorf("--cursor with %+v: %v", l, err)
		}
	}
	l := Line{MaxMemory: "96MiB", Progress: "none"}
	if err := l.Resolve(&Options{Source: "orders", Partition: -1, Cursor: true}, nil, time.Now()); err != nil {
		t.Fatalf("--cursor alone: %v", err)
	}
	l.From = "24h"
	if err := l.Resolve(&Options{Source: "orders", Partition: -1, Cursor: true}, nil, time.Now()); err != nil {
		t.Fatalf("--cursor --from 24h: %v", err)
	}
}

// A --cursor run says how many records are not judged final and the
// source time of the oldest, read again at the cursor; with none, the
// time of the run: everything before it was judged. A cursor record the
// second read does not find is no verdict.
func TestUnjudgedSince(t *testing.T) {
	s := testScan(t, &Options{Cursor: true})
	pt := s.batch[0]
	pt.committed = 10
	for off := range pt.slots {
		pt.slots[off].add(outShift)
	}
	pt.slots[4] |= tierFlight
	pt.slots[7] |= replFlight
	s.judge()
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	src := "orders"
	rec := func(off int64, ts time.Time) *kafka.Message {
		return &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &src, Partition: 0, Offset: kafka.Offset(off)}, Timestamp: ts}
	}
	r := &scripted{events: []kafka.Event{rec(4, at), rec(5, at.Add(-time.Hour))}, position: -1}
	s.readers = func() (reader, error) { return r, nil }
	s.o.ReadTimeout = time.Second
	if err := s.unjudgedSince(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.cursorDone()
	if r.assigned[0].Offset != 4 || s.rep.Unjudged != 6 || s.rep.OldestUnjudged == nil || !s.rep.OldestUnjudged.Equal(at) {
		t.Fatalf("read from %v: %d unjudged since %v; want 6 since %s (the record at the cursor, 4)", r.assigned, s.rep.Unjudged, s.rep.OldestUnjudged, at)
	}

	done := testScan(t, &Options{Cursor: true})
	done.batch[0].committed = 10
	for off := range done.batch[0].slots {
		done.batch[0].slots[off].add(outShift)
	}
	done.judge()
	if err := done.unjudgedSince(context.Background()); err != nil {
		t.Fatal(err)
	}
	done.cursorDone()
	if done.rep.Unjudged != 0 || done.rep.OldestUnjudged == nil || done.rep.OldestUnjudged.Unix() != done.o.Now.Unix() {
		t.Fatalf("all judged: %d unjudged since %v; want 0 since the run's time %s", done.rep.Unjudged, done.rep.OldestUnjudged, done.o.Now)
	}

	s = testScan(t, &Options{Cursor: true})
	s.batch[0].slots[4] |= tierFlight
	s.judge()
	s.readers = func() (reader, error) {
		return &scripted{events: []kafka.Event{kafka.PartitionEOF{Topic: &src, Partition: 0, Offset: 5}}, position: -1}, nil
	}
	s.o.ReadTimeout = time.Second
	if err := s.unjudgedSince(context.Background()); err == nil || !strings.Contains(err.Error(), "not read again") {
		t.Fatalf("the cursor's record not found: %v; want no verdict", err)
	}
}

// Mutation run finding: only a cursor that moved on is committed; one in
// place (the first record still in flight) or below the window's start
// is left alone.
func TestCursorMovesOnlyForward(t *testing.T) {
	s := &scan{source: "orders", parts: map[int32]*part{
		0: {p: 0, lo: 10, cursor: 15},
		1: {p: 1, lo: 10, cursor: 10},
		2: {p: 2, lo: 10, cursor: 4},
	}}
	q := s.moves()
	if len(q) != 1 || q[0].Partition != 0 || q[0].Offset != 15 {
		t.Fatalf("moves %v; want partition 0 to 15 only", q)
	}
}
