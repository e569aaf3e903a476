package integration

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/hamba/avro/v2"

	"relay/internal/envelope"
)

var registryURL = envOr("RELAY_TEST_REGISTRY", "http://127.0.0.1:8081/apis/ccompat/v7")

// Order schemas: v1 is not accepted, v2 is upcast to v3, the reader.
const (
	orderV1 = `{"type":"record","name":"Order","namespace":"it","fields":[{"name":"id","type":"string"}]}`
	orderV2 = `{"type":"record","name":"Order","namespace":"it","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long","default":0}]}`
	orderV3 = `{"type":"record","name":"Order","namespace":"it","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long","default":0},{"name":"currency","type":"string","default":"EUR"}]}`
)

// orders registers v1..v3 under a fresh subject of the real registry.
type orders struct {
	subject string
	ids     [4]int // by version
}

func registerOrders(t *testing.T) *orders {
	t.Helper()
	o := &orders{subject: uniq(t, "order-value")}
	for v, s := range []string{orderV1, orderV2, orderV3} {
		// Schema ids are global: make each test's schemas its own by
		// a doc string, or another test's identical schema shares ids.
		text := strings.Replace(s, `"name":"Order"`, `"name":"Order","doc":"`+o.subject+`"`, 1)
		o.ids[v+1] = registerAs(t, o.subject, "AVRO", text)
	}
	return o
}

// value frames an order of version v in the Confluent wire format.
func (o *orders) value(t *testing.T, v int, rec map[string]any) []byte {
	t.Helper()
	s := avro.MustParse([]string{"", orderV1, orderV2, orderV3}[v])
	body, err := avro.Marshal(s, rec)
	if err != nil {
		t.Fatal(err)
	}
	return frame(o.ids[v], nil, body)
}

// env is the admission configuration for o, through registry base url.
func (o *orders) env(base string) []string {
	return []string{
		"RELAY_SCHEMA_REGISTRY_URL", base, "RELAY_SCHEMA_SUBJECT", o.subject,
		"RELAY_SCHEMA_ACCEPT", "2-3", "RELAY_SCHEMA_READER_VERSION", "3",
	}
}

// faultProxy stands between relay and the real registry and can make it
// fail: every answer (down), or the next n answers.
type faultProxy struct {
	srv  *httptest.Server
	down atomic.Bool
	// idsDown fails only lookups by schema id (records), not the
	// subject lookups relay makes at start-up.
	idsDown atomic.Bool
	// flaky is the percentage of lookups by schema id (the record path)
	// that fail at random.
	flaky atomic.Int64
	next  atomic.Int64
	// body is the error body of a failed answer.
	body     atomic.Value
	requests atomic.Int64
}

func newFaultProxy(t *testing.T) *faultProxy {
	t.Helper()
	target, _ := url.Parse(registryURL)
	target.Path = ""
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &faultProxy{}
	p.body.Store(`{"error_code":50001,"message":"injected outage"}`)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		if p.down.Load() || (p.idsDown.Load() && strings.Contains(r.URL.Path, "/schemas/ids/")) || p.next.Add(-1) >= 0 || (strings.Contains(r.URL.Path, "/schemas/ids/") && rand.Int64N(100) < p.flaky.Load()) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, p.body.Load().(string))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// url is the proxied ccompat base URL.
func (p *faultProxy) url() string {
	u, _ := url.Parse(registryURL)
	return p.srv.URL + u.Path
}

// rec is one record to produce and what the test expects of it.
type rec struct {
	key, value []byte
	want       string // "output", "quarantine:<CODE>", "rejected:<CODE>", or "" for any terminal state
}

// produceRecs writes recs in order (round-robin over partitions by key
// hash) and returns id → expectation for every record the broker took.
func produceRecs(t *testing.T, topic string, recs []rec) map[string]string {
	t.Helper()
	msgs := make([]*kafka.Message, len(recs))
	for i, r := range recs {
		msgs[i] = &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny}, Key: r.key, Value: r.value, Opaque: r.want}
	}
	out := map[string]string{}
	for _, m := range deliver(t, msgs) {
		out[envelope.ID(topic, m.TopicPartition.Partition, int64(m.TopicPartition.Offset))] = m.Opaque.(string)
	}
	return out
}

// deliver produces msgs (acks=all) and returns them as the broker took
// them, with their partitions and offsets.
func deliver(t *testing.T, msgs []*kafka.Message) []*kafka.Message {
	t.Helper()
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	done := make(chan kafka.Event, len(msgs))
	for _, m := range msgs {
		if err := p.Produce(m, done); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]*kafka.Message, 0, len(msgs))
	for range msgs {
		m := (<-done).(*kafka.Message)
		if m.TopicPartition.Error != nil {
			t.Fatalf("produce: %v", m.TopicPartition.Error)
		}
		out = append(out, m)
	}
	return out
}

// landing is where one source record ended up.
type landing struct {
	topic string
	code  string
	msg   *kafka.Message
}

// collect reads the terminal topics and returns id → every landing.
func collect(t *testing.T, s *scenario) map[string][]landing {
	t.Helper()
	out := map[string][]landing{}
	for _, topic := range []string{s.output, s.quarantine, s.rejected} {
		for _, m := range readCommitted(t, topic, s.partitions) {
			hs := toEnvelopeHeaders(m.Headers)
			key := envelope.MessageID
			if topic != s.output {
				key = envelope.FailureID
			}
			id, _ := envelope.Lookup(hs, key)
			code, _ := envelope.Lookup(hs, envelope.ErrorCode)
			out[string(id)] = append(out[string(id)], landing{topic: topic, code: string(code), msg: m})
		}
	}
	return out
}

func toEnvelopeHeaders(hs []kafka.Header) []envelope.Header {
	out := make([]envelope.Header, len(hs))
	for i, h := range hs {
		out[i] = envelope.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// waitSettled waits until the group has consumed the source and every tier
// to the end and no transaction is open on the written topics.
func waitSettled(t *testing.T, s *scenario, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, time.Until(deadline))
	// Tier topics are written in transactions: their end offsets count
	// the commit markers, which no consumer ever commits past. Caught up
	// means: past the last record. A record may move to another tier (or
	// back behind its key's head) while the tiers are checked, so settled
	// means: drained, and no tier written to for two seconds after.
	for {
		before := map[string]map[int32]int64{}
		for _, topic := range s.tiers {
			waitTierDrained(t, s, topic, deadline)
			before[topic] = endOffsets(t, topic, s.partitions)
		}
		time.Sleep(2 * time.Second)
		quiet := true
		for _, topic := range s.tiers {
			if !equalOffsets(before[topic], endOffsets(t, topic, s.partitions)) {
				quiet = false
			}
		}
		if quiet {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tiers of %s did not settle by the deadline", s.src.topic)
		}
	}
	for _, topic := range append([]string{s.output, s.quarantine, s.rejected}, s.tiers...) {
		assertNoOpenTransaction(t, topic, s.partitions, 30*time.Second)
	}
}

// assertOutcomes checks the whole-run invariant of the failure state
// machine: every source record is in exactly one of output, quarantine and
// rejected, exactly once, and where the test expects it.
func assertOutcomes(t *testing.T, s *scenario, want map[string]string) map[string][]landing {
	t.Helper()
	got := collect(t, s)
	bad := 0
	report := func(format string, args ...any) {
		bad++
		if bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for id, w := range want {
		ls := got[id]
		switch {
		case len(ls) == 0:
			report("%s (%s) is in no terminal topic: lost", id, w)
			continue
		case len(ls) > 1:
			report("%s is in terminal topics %d times: %v", id, len(ls), describeLandings(ls))
			continue
		}
		l := ls[0]
		where := "output"
		switch l.topic {
		case s.quarantine:
			where = "quarantine:" + l.code
		case s.rejected:
			where = "rejected:" + l.code
		}
		if !matches(where, w) {
			report("%s went to %s, want %s", id, where, w)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			report("terminal record %q has no source record", id)
		}
	}
	if bad > 0 {
		t.Fatalf("%d violations over %d source records", bad, len(want))
	}
	counts := map[string]int{}
	for _, ls := range got {
		l := ls[0]
		counts[strings.TrimPrefix(l.topic, s.src.topic)+" "+l.code]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, counts[k])
	}
	t.Logf("every one of %d source records reached exactly one terminal state:%s", len(want), b.String())
	return got
}

func describeLandings(ls []landing) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = fmt.Sprintf("%s[%d]@%d %s", l.topic, l.msg.TopicPartition.Partition, l.msg.TopicPartition.Offset, l.code)
	}
	return out
}

// waitTierDrained waits until the group has committed past the last record
// of every partition of a tier topic.
func waitTierDrained(t *testing.T, s *scenario, topic string, deadline time.Time) {
	t.Helper()
	for {
		// The group's offsets first, then the records: a transaction that
		// lands between the two reads (a record hopping from one tier to
		// another) shows its records, not only its commit. Read the other
		// way round, the new records were missed and their commit taken
		// for the drain (seen once: key k0's followers collected before
		// their last hop was output).
		got := committed(t, s.group, topic, s.partitions)
		last := map[int32]int64{}
		for _, m := range readCommitted(t, topic, s.partitions) {
			last[m.TopicPartition.Partition] = int64(m.TopicPartition.Offset) + 1
		}
		done := true
		for p, want := range last {
			if got[p] < want {
				done = false
			}
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s has not drained %s: committed %v, records up to %v", s.group, topic, got, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// matches reports whether where is one of the |-separated expectations
// (each a prefix); an empty expectation takes any terminal state.
func matches(where, want string) bool {
	if want == "" {
		return true
	}
	for _, w := range strings.Split(want, "|") {
		if strings.HasPrefix(where, w) {
			return true
		}
	}
	return false
}

func envelopeOf(t *testing.T, m *kafka.Message) *envelope.Failure {
	t.Helper()
	f, err := envelope.Parse(toEnvelopeHeaders(m.Headers))
	if err != nil {
		t.Fatal(err)
	}
	return f
}
