package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/hamba/avro/v2"

	"relay/internal/envelope"
	"relay/internal/schema"
)

const rulesYAML = `rules:
  - name: NEGATIVE_AMOUNT
    expr: record.amount < 0
`

func rulesFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, []byte(rulesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAdmissionOutcomes runs every failure class through one relay
// against the real registry: valid current and older versions (upcast), an
// unsupported version, garbage bytes, a truncated body, an unknown schema
// id and a rule violation. Invalid input is quarantined at once (attempt 1,
// no tier record); every record reaches exactly one terminal state.
func TestAdmissionOutcomes(t *testing.T) {
	o := registerOrders(t)
	extra := append(o.env(registryURL), "RELAY_RULES_FILE", rulesFile(t))
	s := newScenario(t, 3, extra...)
	good3 := o.value(t, 3, map[string]any{"id": "a", "amount": int64(5), "currency": "USD"})
	recs := []rec{
		{[]byte("k1"), good3, "output"},
		{[]byte("k2"), o.value(t, 2, map[string]any{"id": "b", "amount": int64(7)}), "output"},
		{[]byte("k3"), o.value(t, 1, map[string]any{"id": "c"}), "quarantine:SCHEMA_UNSUPPORTED"},
		{[]byte("k4"), []byte(`{"id":"json, not avro"}`), "quarantine:WIRE_FORMAT_INVALID"},
		{[]byte("k5"), good3[:len(good3)-2], "quarantine:PAYLOAD_MALFORMED"},
		{[]byte("k6"), append([]byte{0, 0x7f, 0xff, 0xff, 0xf0}, good3[5:]...), "quarantine:SCHEMA_NOT_FOUND"},
		{[]byte("k7"), o.value(t, 3, map[string]any{"id": "d", "amount": int64(-3), "currency": "EUR"}), "rejected:REJECTED_NEGATIVE_AMOUNT"},
		{nil, nil, "quarantine:WIRE_FORMAT_INVALID"},
	}
	want := produceRecs(t, s.src.topic, recs)
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	waitSettled(t, s, 90*time.Second)
	got := assertOutcomes(t, s, want)
	r.stop()

	for _, topic := range s.tiers {
		if n := len(readCommitted(t, topic, s.partitions)); n != 0 {
			t.Errorf("invalid input must not be retried: %d records in %s", n, topic)
		}
	}
	for id, ls := range got {
		l := ls[0]
		hs := toEnvelopeHeaders(l.msg.Headers)
		switch want[id] {
		case "output":
			sid, body, err := schema.ParseWire(l.msg.Value)
			if err != nil || sid != o.ids[3] {
				t.Errorf("%s: output framed with schema %d, want the reader's %d (%v)", id, sid, o.ids[3], err)
				continue
			}
			var v map[string]any
			if err := avro.Unmarshal(avro.MustParse(orderV3), body, &v); err != nil {
				t.Errorf("%s: output does not decode as v3: %v", id, err)
			}
			if v["id"] == "b" && v["currency"] != "EUR" {
				t.Errorf("v2 record upcast without the v3 default: %v", v)
			}
		case "quarantine:SCHEMA_UNSUPPORTED":
			f, err := envelope.Parse(hs)
			if err != nil || f.SchemaSubject != o.subject || f.SchemaVersion != 1 || f.SchemaID != o.ids[1] || f.Attempt != 1 || f.Class != "invalid" {
				t.Errorf("unsupported envelope %+v (%v)", f, err)
			}
			if string(l.msg.Value) != string(o.value(t, 1, map[string]any{"id": "c"})) || string(l.msg.Key) != "k3" {
				t.Errorf("quarantine must keep the original key and bytes")
			}
			// The operator's view of it.
			out, err := relayCmd(t, s.env("x"), "quarantine", "show", id)
			if err != nil {
				t.Fatalf("relay quarantine show: %v\n%s", err, out)
			}
			var view map[string]any
			if err := json.Unmarshal(out, &view); err != nil {
				t.Fatalf("quarantine show is not JSON: %v\n%s", err, out)
			}
			if view["failureId"] != id || view["errorCode"] != "SCHEMA_UNSUPPORTED" || view["payloadSchema"] != o.subject+".v1" || view["attempt"] != float64(1) ||
				view["payloadDecoded"] != true || !strings.Contains(fmt.Sprint(view["payload"]), `"id": "c"`) {
				t.Errorf("quarantine show: %s", out)
			}
		default:
			if f, err := envelope.Parse(hs); err != nil || f.Attempt != 1 {
				t.Errorf("%s: envelope %+v (%v): invalid input is never retried", id, f, err)
			}
		}
	}
}

// relayCmd runs a relay command with env and returns its stdout.
func relayCmd(t *testing.T, env map[string]string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(relayBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "RELAY_KAFKA_BOOTSTRAP_SERVERS=" + bootstrap}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return []byte(stderr.String()), err
	}
	return out, nil
}

// TestTransientRecoversInPlace pins in-place recovery: registry failures
// shorter than the blocking budget leave only the output, no tier record.
func TestTransientRecoversInPlace(t *testing.T) {
	o := registerOrders(t)
	proxy := newFaultProxy(t)
	s := newScenario(t, 1, append(o.env(proxy.url()), "RELAY_BLOCKING_ATTEMPTS", "2", "RELAY_BLOCKING_BACKOFF", "200ms")...)
	// Quarantine retention shorter than the response objective: relay
	// starts, and says so.
	setTopicConfig(t, s.quarantine, "retention.ms", "3600000")
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	r.waitLog("quarantine retention is shorter than the response objective", 60*time.Second)
	r.waitLog("partitions assigned", 60*time.Second)
	proxy.next.Store(2) // the first two lookups fail; the third attempt passes
	want := produceRecs(t, s.src.topic, []rec{{[]byte("k"), o.value(t, 2, map[string]any{"id": "x", "amount": int64(1)}), "output"}})
	waitSettled(t, s, 60*time.Second)
	assertOutcomes(t, s, want)
	r.stop()
	for _, topic := range s.tiers {
		if n := len(readCommitted(t, topic, s.partitions)); n != 0 {
			t.Errorf("%d records in %s; a failure that recovers in place writes none", n, topic)
		}
	}
	if proxy.next.Load() >= 0 {
		t.Fatal("the injected failures were not all used: the test proved nothing")
	}
}

// TestRegistryOutageThroughTiers pins retries through the tiers: a registry
// outage longer than the blocking budget moves each record exactly once to
// the first tier, then through the tiers with their delays; lag is visible
// on the tier topics; nothing is quarantined before its budget ends; after
// the registry returns, everything is processed exactly once.
func TestRegistryOutageThroughTiers(t *testing.T) {
	o := registerOrders(t)
	proxy := newFaultProxy(t)
	s := newScenario(t, 2, append(o.env(proxy.url()), "RELAY_ORDERING", "unordered",
		"RELAY_RETRY_TIERS", "2s,3s", "RELAY_BLOCKING_ATTEMPTS", "1", "RELAY_BLOCKING_BACKOFF", "100ms",
		"RELAY_RETRY_MAX_ATTEMPTS", "20", "RELAY_RETRY_MAX_ELAPSED", "2m")...)
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	r.waitLog("partitions assigned", 60*time.Second)
	proxy.down.Store(true)
	var recs []rec
	for i := range 40 {
		recs = append(recs, rec{[]byte{byte('a' + i%7)}, o.value(t, 3, map[string]any{"id": "o", "amount": int64(i), "currency": "EUR"}), "output"})
	}
	want := produceRecs(t, s.src.topic, recs)
	// The outage lasts long enough for every record to pass both tiers.
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, 60*time.Second)
	time.Sleep(7 * time.Second)
	first := readCommitted(t, s.tiers[0], s.partitions)
	second := readCommitted(t, s.tiers[1], s.partitions)
	if n := len(readCommitted(t, s.quarantine, s.partitions)); n != 0 {
		t.Fatalf("%d records quarantined before their budget ended", n)
	}
	if len(first) != len(want) {
		t.Fatalf("first tier holds %d records, want each of %d exactly once", len(first), len(want))
	}
	seen := map[string]bool{}
	for _, m := range first {
		f, err := envelope.Parse(toEnvelopeHeaders(m.Headers))
		if err != nil || seen[f.ID] || f.Attempt != 2 || f.Code != "SCHEMA_REGISTRY_UNAVAILABLE" || f.NotBefore.Sub(f.LastFailedAt) != 2*time.Second {
			t.Fatalf("first tier record %+v (%v, seen %v)", f, err, seen[f.ID])
		}
		seen[f.ID] = true
	}
	if len(second) < len(want) {
		t.Fatalf("second tier holds %d records after 7s of outage, want at least %d", len(second), len(want))
	}
	// Lag is visible: the tier topics hold records the group has not
	// finished.
	lag := int64(0)
	end, com := endOffsets(t, s.tiers[1], s.partitions), committed(t, s.group, s.tiers[1], s.partitions)
	for p, e := range end {
		lag += e - max(com[p], 0)
	}
	if lag == 0 {
		t.Fatal("no lag on the last tier during the outage")
	}
	t.Logf("during the outage: %d first-tier records, %d second-tier records, lag %d on %s", len(first), len(second), lag, s.tiers[1])
	proxy.down.Store(false)
	waitSettled(t, s, 90*time.Second)
	assertOutcomes(t, s, want)
	r.stop()
}

// TestQuarantineWriteFailureAborts pins a failed quarantine write: when the
// quarantine write fails (the record is too large for the quarantine
// topic), the transaction aborts, the source record is not committed,
// relay says why, and once the cause is fixed the record is quarantined
// exactly once.
func TestQuarantineWriteFailureAborts(t *testing.T) {
	o := registerOrders(t)
	s := newScenario(t, 1, o.env(registryURL)...)
	setTopicConfig(t, s.quarantine, "max.message.bytes", "1024")
	big := make([]byte, 4096)
	for i := range big {
		big[i] = 'x'
	}
	want := produceRecs(t, s.src.topic, []rec{
		{[]byte("a"), o.value(t, 3, map[string]any{"id": "ok", "amount": int64(1), "currency": "EUR"}), "output"},
		{[]byte("b"), big, "quarantine:WIRE_FORMAT_INVALID"},
	})
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	r.waitLog("partitions assigned", 60*time.Second)
	time.Sleep(5 * time.Second)
	if c := committed(t, s.group, s.src.topic, 1); c[0] > 0 {
		t.Fatalf("committed %v while the quarantine write fails: the record would be lost", c)
	}
	log := r.stderr.String()
	if !strings.Contains(log, s.quarantine) || !strings.Contains(strings.ToLower(log), "too large") {
		t.Fatalf("relay does not say which write fails and why:\n%s", tail(log, 30))
	}
	setTopicConfig(t, s.quarantine, "max.message.bytes", "1048588")
	waitSettled(t, s, 60*time.Second)
	assertOutcomes(t, s, want)
	r.stop()
}

func setTopicConfig(t *testing.T, topic, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := admin(t).IncrementalAlterConfigs(ctx, []kafka.ConfigResource{{
		Type: kafka.ResourceTopic, Name: topic,
		Config: []kafka.ConfigEntry{{Name: key, Value: value, IncrementalOperation: kafka.AlterConfigOpTypeSet}},
	}})
	if err != nil || res[0].Error.Code() != kafka.ErrNoError {
		t.Fatalf("alter %s %s=%s: %v %v", topic, key, value, err, res)
	}
}

// TestSensitiveDataRedacted pins redaction: a dependency that echoes
// secrets and personal data in its error text; none of it reaches a header
// or a log line.
func TestSensitiveDataRedacted(t *testing.T) {
	o := registerOrders(t)
	proxy := newFaultProxy(t)
	secrets := []string{"hunter2", "jane.doe@example.com", "4111111111111111", "eyJhbGciOiJIUzI1NiJ9.e30.sig", "CUST-99812"}
	proxy.body.Store(`{"error_code":50001,"message":"db login password=hunter2 failed for jane.doe@example.com card 4111111111111111 Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig customer CUST-99812"}`)
	s := newScenario(t, 1, append(o.env(proxy.url()),
		"RELAY_RETRY_TIERS", "1s", "RELAY_BLOCKING_ATTEMPTS", "1", "RELAY_BLOCKING_BACKOFF", "50ms",
		"RELAY_RETRY_MAX_ATTEMPTS", "3", "RELAY_REDACT_PATTERN", `CUST-\d+`, "RELAY_LOG_LEVEL", "debug")...)
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	r.waitLog("partitions assigned", 60*time.Second)
	proxy.down.Store(true)
	want := produceRecs(t, s.src.topic, []rec{{[]byte("k"), o.value(t, 3, map[string]any{"id": "s", "amount": int64(1), "currency": "EUR"}), "quarantine:SCHEMA_REGISTRY_UNAVAILABLE_EXHAUSTED"}})
	waitSettled(t, s, 60*time.Second)
	assertOutcomes(t, s, want)
	r.stop()
	var msgs []*kafka.Message
	for _, topic := range append([]string{s.quarantine}, s.tiers...) {
		msgs = append(msgs, readCommitted(t, topic, s.partitions)...)
	}
	if len(msgs) < 2 {
		t.Fatalf("only %d envelopes written; the test needs the failure to pass a tier", len(msgs))
	}
	for _, m := range msgs {
		for _, h := range m.Headers {
			for _, sec := range secrets {
				if strings.Contains(string(h.Value), sec) {
					t.Errorf("header %s leaks %q: %s", h.Key, sec, h.Value)
				}
			}
		}
	}
	log := r.stderr.String()
	if !strings.Contains(log, "SCHEMA_REGISTRY_UNAVAILABLE") {
		t.Fatal("the failure was not logged; the test proved nothing")
	}
	for _, sec := range secrets {
		if strings.Contains(log, sec) {
			t.Errorf("a log line leaks %q", sec)
		}
	}
}
