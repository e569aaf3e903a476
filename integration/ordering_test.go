package integration

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/schema"
)

// orderingCase sets up the ordering case: on partition 0, A1 fails three times
// at the hook before it passes, A2 (same key) and B1 (another key) come
// after it; partition 1 holds C1..C3. It returns the scenario, the hook's
// call counts and the source offsets by record id.
func orderingCase(t *testing.T, ordering string, extra ...string) (*scenario, *hookCalls, map[string]int64, *relay) {
	t.Helper()
	o := registerOrders(t)
	calls := &hookCalls{n: map[string]int{}}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Record map[string]any `json:"record"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		id, _ := req.Record["id"].(string)
		if n := calls.add(id); id == "A1" && n <= 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	s := newScenario(t, 2, append(o.env(registryURL),
		"RELAY_ORDERING", ordering, "RELAY_HOOK_URL", hook.URL, "RELAY_HOOK_TIMEOUT", "500ms", "RELAY_SCHEMA_TIMEOUT", "500ms",
		"RELAY_RETRY_TIERS", "1s,2s", "RELAY_BLOCKING_ATTEMPTS", "1", "RELAY_BLOCKING_BACKOFF", "50ms")...)
	s.extra = append(s.extra, extra...)
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "acks": "all"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	offsets := map[string]int64{}
	for _, r := range []struct {
		id, key string
		part    int32
	}{{"A1", "A", 0}, {"A2", "A", 0}, {"B1", "B", 0}, {"C1", "C", 1}, {"C2", "C", 1}, {"C3", "C", 1}} {
		dr := make(chan kafka.Event, 1)
		err := p.Produce(&kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &s.src.topic, Partition: r.part},
			Key:            []byte(r.key), Value: o.value(t, 3, map[string]any{"id": r.id, "amount": int64(1), "currency": "EUR"}),
		}, dr)
		if err != nil {
			t.Fatal(err)
		}
		m := (<-dr).(*kafka.Message)
		if m.TopicPartition.Error != nil {
			t.Fatal(m.TopicPartition.Error)
		}
		offsets[r.id] = int64(m.TopicPartition.Offset)
	}
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	return s, calls, offsets, r
}

type hookCalls struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *hookCalls) add(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[id]++
	return h.n[id]
}

func (h *hookCalls) get(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[id]
}

// outputOrder reads the output and returns the record ids of a partition
// in output order.
func outputOrder(t *testing.T, s *scenario, partition int32) []string {
	t.Helper()
	var ids []string
	for _, m := range readCommitted(t, s.output, s.partitions) {
		if m.TopicPartition.Partition != partition {
			continue
		}
		_, body, err := schema.ParseWire(m.Value)
		if err != nil {
			t.Fatal(err)
		}
		// The id is the first field: a length-prefixed string.
		n := int(body[0] >> 1)
		ids = append(ids, string(body[1:1+n]))
	}
	return ids
}

// TestPartitionOrderingWaits is the ordering case for RELAY_ORDERING=
// partition: the whole partition waits for A1 (nothing after it is
// committed), the other partition flows, and the output keeps the source
// order exactly.
func TestPartitionOrderingWaits(t *testing.T) {
	s, calls, offsets, r := orderingCase(t, "partition")
	deadline := time.Now().Add(30 * time.Second)
	for calls.get("A1") < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("A1 was not retried: %d hook calls", calls.get("A1"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A1 waits for its last attempt: partition 1 is done, partition 0 is
	// committed up to A1 and not past it.
	waitCaughtUpPartition(t, s, 1, 3, 20*time.Second)
	if c := committed(t, s.group, s.src.topic, s.partitions); c[0] > offsets["A1"] {
		t.Fatalf("partition 0 committed to %d while A1 (offset %d) waits: later records passed it", c[0], offsets["A1"])
	}
	if calls.get("A2") != 0 || calls.get("B1") != 0 {
		t.Fatalf("A2 or B1 reached the hook while A1 waited: %d, %d", calls.get("A2"), calls.get("B1"))
	}
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, 30*time.Second)
	r.stop()
	if got := outputOrder(t, s, 0); len(got) != 3 || got[0] != "A1" || got[1] != "A2" || got[2] != "B1" {
		t.Fatalf("partition 0 output %v, want [A1 A2 B1]", got)
	}
	if n := calls.get("A1"); n != 4 {
		t.Errorf("A1 reached the hook %d times, want 4", n)
	}
	for _, topic := range []string{s.quarantine, s.rejected} {
		if n := len(readCommitted(t, topic, s.partitions)); n != 0 {
			t.Errorf("%d records in %s", n, topic)
		}
	}
}

// TestUnorderedLaterRecordOvertakes is the ordering case for unordered: A1
// goes to a tier and A2 (same key) is processed first; nothing waits.
func TestUnorderedLaterRecordOvertakes(t *testing.T) {
	s, calls, _, r := orderingCase(t, "unordered")
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for calls.get("A1") < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("A1 not done: %d hook calls", calls.get("A1"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := waitOutput(t, s, 0, 3, time.Until(deadline))
	r.stop()
	if len(got) != 3 || got[len(got)-1] != "A1" {
		t.Fatalf("partition 0 output %v: under unordered, A1 comes out after A2 and B1", got)
	}
}

func waitCaughtUpPartition(t *testing.T, s *scenario, partition int32, want int64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if c := committed(t, s.group, s.src.topic, s.partitions); c[partition] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition %d not committed to %d within %s: %v", partition, want, d, committed(t, s.group, s.src.topic, s.partitions))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPartitionOrderingQuarantinesAndMovesOn: when the waiting record's
// budget ends, it is quarantined and its partition moves on, in order.
func TestPartitionOrderingQuarantinesAndMovesOn(t *testing.T) {
	s, calls, offsets, r := orderingCase(t, "partition", "RELAY_RETRY_MAX_ATTEMPTS", "3")
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, 30*time.Second)
	r.stop()
	if got := outputOrder(t, s, 0); len(got) != 2 || got[0] != "A2" || got[1] != "B1" {
		t.Fatalf("partition 0 output %v, want [A2 B1]", got)
	}
	q := readCommitted(t, s.quarantine, s.partitions)
	if len(q) != 1 || q[0].TopicPartition.Partition != 0 {
		t.Fatalf("quarantine holds %d records, want A1 alone", len(q))
	}
	f := envelopeOf(t, q[0])
	if f.SourceOffset != offsets["A1"] || f.Code != "HOOK_UNAVAILABLE_EXHAUSTED" || f.Attempt != 3 {
		t.Fatalf("quarantined %+v", f)
	}
	if calls.get("A1") != 3 {
		t.Errorf("A1 reached the hook %d times, want 3", calls.get("A1"))
	}
}

// TestKeyOrderingCase is the ordering case for RELAY_ORDERING=key: A2
// waits behind A1 and comes out after it; B1, another key on the same
// partition, is not held back.
func TestKeyOrderingCase(t *testing.T) {
	s, calls, _, r := orderingCase(t, "key")
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, 30*time.Second)
	got := waitOutput(t, s, 0, 3, 40*time.Second)
	r.stop()
	if len(got) != 3 || got[0] != "B1" || got[1] != "A1" || got[2] != "A2" {
		t.Fatalf("partition 0 output %v, want [B1 A1 A2]: B1 not delayed, A2 after A1", got)
	}
	if calls.get("A2") != 1 {
		t.Errorf("A2 reached the hook %d times; a follower is tried only at its turn", calls.get("A2"))
	}
}

// waitOutput polls the output of a partition until it holds n records or d
// passes, and returns the ids in output order.
func waitOutput(t *testing.T, s *scenario, partition int32, n int, d time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := outputOrder(t, s, partition)
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(250 * time.Millisecond)
	}
}
