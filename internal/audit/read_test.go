package audit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// scripted is a reader that hands out its events, then nothing.
type scripted struct {
	events   []kafka.Event
	position int64 // what Position says (-1: nothing)
	assigned []kafka.TopicPartition
}

func (r *scripted) Assign(tps []kafka.TopicPartition) error { r.assigned = tps; return nil }
func (r *scripted) Close() error                            { return nil }
func (r *scripted) Poll(int) kafka.Event {
	if len(r.events) == 0 {
		time.Sleep(time.Millisecond)
		return nil
	}
	ev := r.events[0]
	r.events = r.events[1:]
	return ev
}

func (r *scripted) Position(tps []kafka.TopicPartition) ([]kafka.TopicPartition, error) {
	out := make([]kafka.TopicPartition, len(tps))
	for i, tp := range tps {
		out[i] = tp
		out[i].Offset = kafka.Offset(r.position)
	}
	return out, nil
}

func readWith(t *testing.T, r *scripted, timeout time.Duration) (n int, err error) {
	t.Helper()
	s := testScan(t, &Options{})
	s.o.ReadTimeout = timeout
	s.readers = func() (reader, error) { return r, nil }
	err = s.readTopic(context.Background(), "orders.valid", map[int32]kafka.Offset{0: 0}, map[int32]int64{0: 3}, func(*kafka.Message) { n++ })
	return n, err
}

// A topic is read to the end it had at the cut, by its records, a
// partition EOF, or the position moved past aborted records and
// markers; records at or past the end are not evidence.
func TestReadToTheEnd(t *testing.T) {
	valid := "orders.valid"
	rec := func(off int64) *kafka.Message {
		return &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &valid, Partition: 0, Offset: kafka.Offset(off)}}
	}
	if n, err := readWith(t, &scripted{events: []kafka.Event{rec(0), rec(1), rec(2), rec(3)}, position: -1}, time.Minute); err != nil || n != 3 {
		t.Fatalf("by records: %d read, %v; want 3", n, err)
	}
	if n, err := readWith(t, &scripted{events: []kafka.Event{rec(0), kafka.PartitionEOF{Topic: &valid, Partition: 0, Offset: 3}}, position: -1}, time.Minute); err != nil || n != 1 {
		t.Fatalf("by EOF: %d read, %v; want 1", n, err)
	}
	if n, err := readWith(t, &scripted{events: []kafka.Event{rec(0)}, position: 3}, time.Minute); err != nil || n != 1 {
		t.Fatalf("by the position: %d read, %v; want 1", n, err)
	}
	if n, err := readWith(t, &scripted{events: []kafka.Event{rec(0), rec(5)}, position: -1}, time.Minute); err != nil || n != 1 {
		t.Fatalf("a record past the cut's end: %d read, %v; want 1 (the record at 5 is not evidence)", n, err)
	}
}

// A read that does not reach the cut's end in time, a record with an
// error, or a fatal error, is an error: never a complete read.
func TestReadErrorsAreNoVerdict(t *testing.T) {
	valid := "orders.valid"
	if _, err := readWith(t, &scripted{position: 1}, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "--read-timeout") {
		t.Fatalf("a read short of the end: %v, want the timeout named", err)
	}
	broken := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &valid, Partition: 0, Offset: 0, Error: errors.New("corrupt")}}
	if _, err := readWith(t, &scripted{events: []kafka.Event{broken}, position: 3}, 2*time.Second); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("a record with an error: %v, want it named", err)
	}
	fatal := kafka.NewError(kafka.ErrFatal, "fenced", true)
	if _, err := readWith(t, &scripted{events: []kafka.Event{fatal}, position: 3}, 2*time.Second); err == nil || !strings.Contains(err.Error(), "fenced") {
		t.Fatalf("a fatal error: %v, want it named", err)
	}
}
