package quarantine

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/statetopic"
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
func TestIndexFoldsAsLoad(t *testing.T) { foldsAsLoad(t, 3000) }

// Ids whose hashes collide are told apart (the collide map): with every
// id hashing alike, the index still folds as Load does.
func TestIndexFoldsAsLoadWhenIDsCollide(t *testing.T) {
	idHash = func(maphash.Seed, string) uint64 { return 42 }
	t.Cleanup(func() { idHash = maphash.String })
	foldsAsLoad(t, 300)
}

func foldsAsLoad(t *testing.T, seeds uint64) {
	t.Helper()
	for seed := range seeds {
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

// record is a quarantine record of failure id at p/offset of
// o.quarantine, last failed at at; edit changes its envelope first.
func record(id string, p int32, offset int64, at time.Time, edit func(*envelope.Failure)) *kafka.Message {
	topic := "o.quarantine"
	f := &envelope.Failure{ID: id, SourceTopic: "o", SourcePartition: p, SourceOffset: offset, Class: "permanent", Code: "C",
		Attempt: 1, FirstFailedAt: at, LastFailedAt: at}
	if edit != nil {
		edit(f)
	}
	return &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: p, Offset: kafka.Offset(offset)},
		Headers: envelope.AppendFailure([]kafka.Header(nil), f), Timestamp: at}
}

// A whole record after a damaged one is whole, and one without a
// timestamp has none: the latest record is joined as Load joins it.
func TestIndexJoinsTheLatestRecord(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	damaged := func(m *kafka.Message) *kafka.Message {
		m.Headers = append(m.Headers, kafka.Header{Key: envelope.Attempt, Value: []byte("many")})
		return m
	}
	untimed := func(m *kafka.Message) *kafka.Message { m.Timestamp = time.Time{}; return m }
	for name, c := range map[string]struct {
		records []*kafka.Message
		damaged bool
	}{
		"damaged":                {[]*kafka.Message{damaged(record("o/0/1", 0, 1, t0, nil))}, true},
		"whole after damaged":    {[]*kafka.Message{damaged(record("o/0/1", 0, 1, t0, nil)), record("o/0/1", 0, 2, t0, nil)}, false},
		"no timestamp":           {[]*kafka.Message{untimed(record("o/0/1", 0, 1, t0, nil))}, false},
		"no timestamp after one": {[]*kafka.Message{record("o/0/1", 0, 1, t0, nil), untimed(record("o/0/1", 0, 2, t0, nil))}, false},
	} {
		for _, inLedger := range []bool{false, true} {
			s := &Snapshot{ByID: map[string]*Failure{}}
			x := NewIndex()
			if inLedger {
				e := &ledger.Event{ID: "o/0/1", State: ledger.Open, At: t0, Source: ledger.Source{Topic: "o", Offset: 1}}
				s.fold([]*ledger.Event{e})
				x.mu.Lock()
				x.apply(e, loc{})
				x.mu.Unlock()
			}
			for _, m := range c.records {
				s.add(m, *m.TopicPartition.Topic, "o", nil)
				x.addRecord(m, *m.TopicPartition.Topic, "o")
			}
			if want := s.ByID["o/0/1"]; (want.Record.Damaged != nil) != c.damaged {
				t.Fatalf("%s: Load's record damaged: %v", name, want.Record.Damaged)
			}
			t.Run(fmt.Sprintf("%s, in the ledger %v", name, inLedger), func(t *testing.T) { compareFailure(t, 0, x.Get("o/0/1"), s.ByID["o/0/1"]) })
		}
	}
}

// Retention: a record below its partition's low watermark is gone, one
// at it is not, nor one of a partition the watermarks do not cover yet.
// A failure the ledger does not know is forgotten with its record; one
// it knows stays, without it.
func TestIndexForgetsWhatRetentionDeleted(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	x := NewIndex()
	x.mu.Lock()
	x.apply(&ledger.Event{ID: "o/0/3", State: ledger.Open, At: t0, Source: ledger.Source{Topic: "o", Offset: 3}}, loc{})
	x.mu.Unlock()
	for _, m := range []*kafka.Message{record("o/0/3", 0, 3, t0, nil), record("o/0/4", 0, 4, t0.Add(time.Minute), nil),
		record("o/0/5", 0, 5, t0.Add(2*time.Minute), nil), record("o/1/1", 1, 1, t0.Add(3*time.Minute), nil)} {
		x.addRecord(m, "o.quarantine", "o")
	}
	x.low[x.names.id("o.quarantine")] = []int64{5}
	var got []string
	for _, it := range x.Items(&Filter{Partition: -1}, t0) {
		got = append(got, it.ID+" "+it.Record)
	}
	if want := []string{"o/0/3 " + Gone, "o/0/5 o.quarantine/0/5", "o/1/1 o.quarantine/1/1"}; !slices.Equal(got, want) {
		t.Fatalf("items %q, want %q", got, want)
	}
	if x.Get("o/0/4") != nil || x.Get("o/0/5") == nil {
		t.Fatalf("Get of a gone record's failure %v, of a kept one %v", x.Get("o/0/4"), x.Get("o/0/5"))
	}
}

// The order follows a change that moves a failure's since (a change read
// after a later one of its failure), and a new failure whatever its
// since; Each stops when fn says so.
func TestIndexOrderAfterChanges(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	x := NewIndex()
	apply := func(id string, st ledger.State, at time.Time) {
		x.mu.Lock()
		x.apply(&ledger.Event{ID: id, State: st, At: at}, loc{})
		x.mu.Unlock()
	}
	ids := func() (out []string) {
		x.Each(func(fl *Failure) bool { out = append(out, fl.ID); return true })
		return out
	}
	apply("o/0/1", ledger.Open, t0.Add(time.Minute))
	apply("o/0/2", ledger.Replaying, t0.Add(2*time.Minute))
	if got := ids(); !slices.Equal(got, []string{"o/0/1", "o/0/2"}) {
		t.Fatalf("order %v", got)
	}
	apply("o/0/2", ledger.Open, t0)
	if got := ids(); !slices.Equal(got, []string{"o/0/2", "o/0/1"}) {
		t.Fatalf("order after o/0/2's open %v", got)
	}
	apply("o/0/0", ledger.Open, time.Unix(0, 0))
	if got := ids(); !slices.Equal(got, []string{"o/0/0", "o/0/2", "o/0/1"}) {
		t.Fatalf("order after a failure at the epoch %v", got)
	}
	n := 0
	x.Each(func(*Failure) bool { n++; return false })
	if n != 1 {
		t.Fatalf("Each went on after false: %d calls", n)
	}
}

// The index grows past its first chunk of entries and of ids: every
// failure reads back whole.
func TestIndexGrowsPastItsChunks(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	id := func(i int) string { return fmt.Sprintf("orders.%064d/0/%d", 0, i) }
	x := NewIndex()
	n, size := entryChunk+1, 0
	x.mu.Lock()
	for i := range n {
		x.apply(&ledger.Event{ID: id(i), State: ledger.Open, At: t0.Add(time.Duration(i) * time.Second)}, loc{0, int64(i)})
		size += len(id(i))
	}
	x.mu.Unlock()
	if size <= 1<<chunkBits {
		t.Fatalf("the ids fill %d bytes, not more than a chunk", size)
	}
	i := 0
	x.Each(func(fl *Failure) bool {
		if fl.ID != id(i) {
			t.Fatalf("failure %d is %q", i, fl.ID)
		}
		i++
		return true
	})
	if i != n || x.Get(id(n-1)) == nil {
		t.Fatalf("%d failures listed of %d; the last %v", i, n, x.Get(id(n-1)))
	}
}

// A failure's ledger records are kept where they were read, every one:
// its history is read there (Reader.Full).
func TestIndexLocations(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	x := NewIndex()
	x.mu.Lock()
	for i, st := range []ledger.State{ledger.Open, ledger.Replaying, ledger.Resolved} {
		x.apply(&ledger.Event{ID: "o/1/1", State: st, At: t0.Add(time.Duration(i) * time.Minute)}, loc{1, int64(10 * (i + 1))})
	}
	x.apply(&ledger.Event{ID: "o/0/2", State: ledger.Open, At: t0}, loc{0, 7})
	x.mu.Unlock()
	x.addRecord(record("o/0/3", 0, 3, t0, nil), "o.quarantine", "o")
	for id, want := range map[string][]loc{"o/1/1": {{1, 10}, {1, 20}, {1, 30}}, "o/0/2": {{0, 7}}, "o/0/3": nil, "o/0/9": nil} {
		if got := x.locations(id); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", id, got, want)
		}
	}
}

// Replays tally each replay's changes: published (the first replaying
// change is when it began), resolved (but for duplicates) and failed
// again; the latest first, n at most.
func TestIndexReplays(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	x := NewIndex()
	x.mu.Lock()
	for _, e := range []*ledger.Event{
		{ID: "o/0/1", State: ledger.Replaying, ReplayID: "r1", At: t0.Add(2 * time.Minute)},
		{ID: "o/0/2", State: ledger.Replaying, ReplayID: "r1", At: t0.Add(time.Minute)},
		{ID: "o/0/3", State: ledger.Replaying, ReplayID: "r1", At: t0.Add(3 * time.Minute)},
		{ID: "o/0/1", State: ledger.Resolved, ReplayID: "r1", At: t0.Add(4 * time.Minute)},
		{ID: "o/0/2", State: ledger.Resolved, ReplayID: "r1", Outcome: ledger.OutcomeDuplicate, At: t0.Add(4 * time.Minute)},
		{ID: "o/0/3", State: ledger.FailedAgain, ReplayID: "r1", At: t0.Add(4 * time.Minute)},
		{ID: "o/0/3", State: ledger.Replaying, ReplayID: "r2", At: t0.Add(10 * time.Minute)},
	} {
		e.Actor, e.Reason = "ops", "fixed"
		x.apply(e, loc{})
	}
	x.mu.Unlock()
	got := x.Replays(5)
	for i := range got {
		got[i].At = got[i].At.UTC()
	}
	want := []ReplayTally{{ID: "r2", Actor: "ops", Reason: "fixed", At: t0.Add(10 * time.Minute), Published: 1},
		{ID: "r1", Actor: "ops", Reason: "fixed", At: t0.Add(time.Minute), Published: 3, Resolved: 1, FailedAgain: 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("replays %+v\nwant %+v", got, want)
	}
	if got := x.Replays(1); len(got) != 1 || got[0].ID != "r2" {
		t.Fatalf("the latest replay: %+v", got)
	}
}

// A reader of one failure keeps only it: other failures' changes and
// records are skipped, even one whose key starts as its own or whose
// key names it but value another, and another failure's unreadable
// record is no warning of its.
func TestIndexOfOneFailure(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	x := NewIndex()
	x.only = "o/0/1"
	other := statetopic.EventMessage("relay.state", &ledger.Event{ID: "o/0/9", State: ledger.Open, At: t0})
	for _, m := range []*kafka.Message{
		statetopic.EventMessage("relay.state", &ledger.Event{ID: "o/0/1", State: ledger.Open, At: t0}),
		statetopic.EventMessage("relay.state", &ledger.Event{ID: "o/0/10", State: ledger.Open, At: t0}),
		{Key: []byte("q|o/0/2|0|open"), Value: []byte("{")},
		{Key: []byte("q|o/0/1|0|replaying"), Value: other.Value},
	} {
		x.applyLedger(m)
	}
	x.addRecord(record("o/0/1", 0, 1, t0, nil), "o.quarantine", "o")
	x.addRecord(record("o/0/2", 0, 2, t0, nil), "o.quarantine", "o")
	if x.Len() != 1 || x.Get("o/0/1") == nil || x.Warning() != nil {
		t.Fatalf("%d failures, o/0/1 %v, warning %v", x.Len(), x.Get("o/0/1"), x.Warning())
	}
}

// The warning is the first unreadable ledger record: a later one does
// not replace it.
func TestIndexWarnsOfTheFirstUnreadableRecord(t *testing.T) {
	x := NewIndex()
	x.applyLedger(&kafka.Message{Key: []byte("q|o/0/1|0|open"), Value: []byte("{")})
	x.applyLedger(&kafka.Message{Key: []byte("q|o/0/2|0|open"), Value: []byte("{")})
	if err := x.Warning(); err == nil || !strings.Contains(err.Error(), "q|o/0/1|") {
		t.Fatalf("warning %v", err)
	}
}

// A time the index cannot hold in int64 nanoseconds — the zero time of
// a damaged record's unreadable relay.last.failed.at, or of a change
// without "at" — is the zero time, as Load has it (time.Time{}.UnixNano()
// is undefined: it reads back as 1754-08-30).
func TestIndexKeepsZeroTimes(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	unreadable := record("o/0/1", 0, 1, t0, nil)
	for i, h := range unreadable.Headers {
		if h.Key == envelope.LastFailedAt {
			unreadable.Headers[i].Value = []byte("yesterday")
		}
	}
	undated := &ledger.Event{ID: "o/0/2", State: ledger.Open, Source: ledger.Source{Topic: "o", Offset: 2}}
	s := &Snapshot{ByID: map[string]*Failure{}}
	s.fold([]*ledger.Event{undated})
	s.add(unreadable, "o.quarantine", "o", nil)
	x := NewIndex()
	x.mu.Lock()
	x.apply(undated, loc{})
	x.mu.Unlock()
	x.addRecord(unreadable, "o.quarantine", "o")
	for _, id := range []string{"o/0/1", "o/0/2"} {
		if got := x.Get(id); !got.Since.IsZero() || !got.ChangedAt.IsZero() {
			t.Errorf("%s: since %v, changed at %v; Load: since %v", id, got.Since.UTC(), got.ChangedAt.UTC(), s.ByID[id].Since)
		}
	}
}

// Version moves with every change to what Each yields, and only then: a
// change folded, a record joined, a retention or low watermark that
// moved; not a read, nor a catch-up that found them as they were.
func TestIndexVersionFollowsChanges(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	x := NewIndex()
	steps := []struct {
		name  string
		do    func()
		moves bool
	}{
		{"a change folded", func() {
			x.applyLedger(statetopic.EventMessage("relay.state", &ledger.Event{ID: "o/0/1", State: ledger.Open, At: t0}))
		}, true},
		{"a record joined", func() { x.addRecord(record("o/0/1", 0, 1, t0, nil), "o.quarantine", "o") }, true},
		{"a record of no failure", func() { x.addRecord(&kafka.Message{}, "o.quarantine", "o") }, false},
		{"a retention", func() { x.setRetention("o.quarantine", time.Hour, true) }, true},
		{"the same retention", func() { x.setRetention("o.quarantine", time.Hour, true) }, false},
		{"another retention", func() { x.setRetention("o.quarantine", 2*time.Hour, true) }, true},
		{"no retention", func() { x.setRetention("o.quarantine", 0, false) }, true},
		{"no retention again", func() { x.setRetention("o.quarantine", 0, false) }, false},
		{"low watermarks", func() { x.setLow("o.quarantine", []int64{0, 0}) }, true},
		{"the same low watermarks", func() { x.setLow("o.quarantine", []int64{0, 0}) }, false},
		{"a low watermark moved", func() { x.setLow("o.quarantine", []int64{2, 0}) }, true},
		{"a read", func() { x.Each(func(*Failure) bool { return true }); x.Get("o/0/1"); x.Summary() }, false},
		{"a second change", func() {
			x.applyLedger(statetopic.EventMessage("relay.state", &ledger.Event{ID: "o/0/1", State: ledger.Resolved, At: t0.Add(time.Second)}))
		}, true},
	}
	for _, s := range steps {
		before := x.Version()
		s.do()
		if moved := x.Version() != before; moved != s.moves {
			t.Errorf("%s: version moved %v, want %v", s.name, moved, s.moves)
		}
	}
}
