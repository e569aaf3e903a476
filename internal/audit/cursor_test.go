package audit

import (
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

// --cursor takes no window of its own.
func TestCursorTakesNoWindow(t *testing.T) {
	for _, l := range []Line{{From: "1h"}, {To: "1h"}, {FromOffsets: "0:1"}, {ToOffsets: "0:9"}} {
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
}
