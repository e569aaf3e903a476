package quarantine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/ledger"
)

// A change or a quarantine record, as a reader meets them.
type read struct {
	e *ledger.Event
	m *kafka.Message
}

// randomQuarantine is the ledger changes and quarantine records of a few
// failures: every state, replay count, duplicate and missing field the
// fold has a rule for, and failures the ledger does not know.
func randomQuarantine(r *rand.Rand) (events []*ledger.Event, records []*kafka.Message) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	codes := []string{"", "SCHEMA_UNSUPPORTED", "HOOK_TIMEOUT", "DECODE_FAILED"}
	topics := []string{"", "orders.quarantine"}
	replays := []string{"", "r1", "r2"}
	for i := range 1 + r.IntN(4) {
		id := fmt.Sprintf("orders/%d/%d", i%2, 100+i)
		src := ledger.Source{Topic: "orders", Partition: int32(i % 2), Offset: int64(100 + i)}
		for range r.IntN(5) {
			e := &ledger.Event{ID: id, State: ledger.States[r.IntN(len(ledger.States))], At: t0.Add(time.Duration(r.IntN(50)) * time.Minute),
				Code: codes[r.IntN(len(codes))], ReplayCount: r.IntN(3), Topic: topics[r.IntN(2)], SchemaVersion: r.IntN(3),
				ReplayID: replays[r.IntN(3)], Actor: "a", Reason: "b"}
			if r.IntN(3) > 0 {
				e.Source = src
			}
			if r.IntN(6) == 0 {
				e.Outcome = ledger.OutcomeDuplicate
			}
			if e.Topic != "" {
				e.RecordTime = e.At
			}
			events = append(events, e)
		}
		for k := range r.IntN(3) {
			f := &envelope.Failure{ID: id, SourcePartition: src.Partition, SourceOffset: src.Offset, Class: []string{"transient", "permanent"}[r.IntN(2)],
				Code: codes[1+r.IntN(3)], ReplayCount: r.IntN(3), SchemaVersion: r.IntN(3), LastFailedAt: t0.Add(time.Duration(r.IntN(50)) * time.Minute),
				FirstFailedAt: t0, SourceTimestamp: t0, Attempt: 1}
			if r.IntN(2) == 0 {
				f.SourceTopic = "orders"
			}
			topic := "orders.quarantine"
			records = append(records, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: src.Partition, Offset: kafka.Offset(k*10 + i)},
				Key: []byte{byte('a' + r.IntN(3))}, Headers: envelope.AppendFailure([]kafka.Header(nil), f), Timestamp: f.LastFailedAt})
		}
	}
	return events, records
}

// The index folds changes and joins records one at a time, in any order
// a catch-up can meet them, to what Load makes of them all at once.
func TestIndexFoldsAsLoad(t *testing.T) {
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 7))
		events, records := randomQuarantine(r)
		s := &Snapshot{ByID: map[string]*Failure{}}
		s.fold(events)
		for _, m := range records {
			s.add(m, *m.TopicPartition.Topic, "orders", nil)
		}
		// The reader meets each topic in order, but a catch-up can read a
		// record before the change written with it.
		var reads []read
		ei, ri := 0, 0
		for ei < len(events) || ri < len(records) {
			if ri == len(records) || ei < len(events) && r.IntN(2) == 0 {
				reads = append(reads, read{e: events[ei]})
				ei++
			} else {
				reads = append(reads, read{m: records[ri]})
				ri++
			}
		}
		x := NewIndex()
		for i, rd := range reads {
			if rd.e != nil {
				x.mu.Lock()
				x.apply(rd.e, loc{0, int64(i)})
				x.mu.Unlock()
			} else {
				x.addRecord(rd.m, *rd.m.TopicPartition.Topic, "orders")
			}
		}
		if x.Len() != len(s.ByID) {
			t.Fatalf("seed %d: %d failures indexed, Load has %d", seed, x.Len(), len(s.ByID))
		}
		for id, want := range s.ByID {
			got := x.Get(id)
			if got == nil {
				t.Fatalf("seed %d: %s not indexed", seed, id)
			}
			compareFailure(t, seed, got, want)
		}
	}
}

func compareFailure(t *testing.T, seed uint64, got, want *Failure) {
	t.Helper()
	type facts struct {
		State               ledger.State
		Code                string
		Since               time.Time
		Source              ledger.Source
		Schema, ReplayCount int
		ReplayID            string
		ChangedAt           time.Time
		Record              string
		Class               string
		RecordTime          time.Time
		Damaged             bool
	}
	of := func(fl *Failure) facts {
		f := facts{State: fl.State, Code: fl.Code, Since: fl.Since.UTC(), Source: fl.Source, Schema: fl.SchemaVersion, ReplayCount: fl.ReplayCount,
			ChangedAt: fl.ChangedAt.UTC()}
		if fl.Entry != nil || fl.seed != nil {
			f.ReplayID = fl.ReplayID
		}
		if fl.ChangedAt.IsZero() {
			f.ChangedAt = time.Time{}
		}
		if r := fl.Record; r != nil {
			f.Record = fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)
			f.Class, f.RecordTime, f.Damaged = r.Failure.Class, r.Timestamp.UTC(), r.Damaged != nil
		}
		return f
	}
	if g, w := of(got), of(want); g != w {
		t.Fatalf("seed %d: %s\nindex %+v\nload  %+v", seed, want.ID, g, w)
	}
}

// The index answers a key filter as a snapshot does, without the key.
func TestIndexMatchesKeys(t *testing.T) {
	x := NewIndex()
	topic := "orders.quarantine"
	for i, key := range []string{"k1", "k2", ""} {
		f := &envelope.Failure{ID: fmt.Sprintf("orders/0/%d", i), SourceTopic: "orders", SourceOffset: int64(i), Code: "C"}
		x.addRecord(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Offset: kafka.Offset(i)}, Key: []byte(key),
			Headers: envelope.AppendFailure([]kafka.Header(nil), f)}, topic, "orders")
	}
	for key, want := range map[string][]string{"k1": {"orders/0/0"}, "k2": {"orders/0/1"}, "": {"orders/0/2"}, "k3": nil} {
		var got []string
		for _, it := range x.Items(&Filter{Partition: -1, Key: &key}, time.Now()) {
			got = append(got, it.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("key %q: %v, want %v", key, got, want)
		}
	}
}

// Each visits the failures oldest first, as Load orders them, also after
// a catch-up adds older ones.
func TestIndexOrder(t *testing.T) {
	x := NewIndex()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	add := func(id string, min int) {
		x.mu.Lock()
		x.apply(&ledger.Event{ID: id, State: ledger.Open, At: t0.Add(time.Duration(min) * time.Minute)}, loc{})
		x.mu.Unlock()
	}
	add("o/0/3", 3)
	add("o/0/1", 1)
	ids := func() (out []string) {
		x.Each(func(fl *Failure) bool { out = append(out, fl.ID); return true })
		return out
	}
	if got := ids(); !slices.Equal(got, []string{"o/0/1", "o/0/3"}) {
		t.Fatalf("order %v", got)
	}
	add("o/0/2", 1)
	add("o/0/0", 0)
	if got := ids(); !slices.Equal(got, []string{"o/0/0", "o/0/1", "o/0/2", "o/0/3"}) {
		t.Fatalf("order after a catch-up %v", got)
	}
}
