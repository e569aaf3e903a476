package integration

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
)

// tracingEnv points relay's OTLP exporter at the stack's backend over
// protocol, with a service name of the test's own and a short batch delay.
func tracingEnv(service, protocol string) []string {
	endpoint := jaegerOTLPHTTP
	if protocol == "grpc" {
		endpoint = "http://127.0.0.1:4317"
	}
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT", endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL", protocol,
		"OTEL_SERVICE_NAME", service, "OTEL_BSP_SCHEDULE_DELAY", "200",
	}
}

// producerSpan sends the span of a producer that wrote a record, so the
// record's traceparent has a parent the backend knows.
func producerSpan(t *testing.T, service, traceID, spanID string) {
	t.Helper()
	now := time.Now()
	postOTLP(t, map[string]any{"resourceSpans": []any{map[string]any{
		"resource": map[string]any{"attributes": []any{
			map[string]any{"key": "service.name", "value": map[string]any{"stringValue": service}},
		}},
		"scopeSpans": []any{map[string]any{"spans": []any{map[string]any{
			"traceId": traceID, "spanId": spanID, "name": "send orders", "kind": 4,
			"startTimeUnixNano": strconv.FormatInt(now.Add(-10*time.Millisecond).UnixNano(), 10),
			"endTimeUnixNano":   strconv.FormatInt(now.UnixNano(), 10),
		}}}},
	}}})
}

// TestTraceFollowsARecordThroughTiers: a record whose producer sent a
// traceparent fails twice at the hook, goes through both tiers and is then
// processed. Its journey is one trace in the backend (OTLP over
// http/protobuf): the producer's span, one process span per attempt, each
// the child of the send span of the one before, the hook calls, the send
// of the output, whose record carries the trace on; the hook saw the
// trace too.
func TestTraceFollowsARecordThroughTiers(t *testing.T) {
	requireJaeger(t)
	o := registerOrders(t)
	var mu sync.Mutex
	var hookTraces []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hookTraces = append(hookTraces, r.Header.Get("traceparent"))
		n := len(hookTraces)
		mu.Unlock()
		if n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	n := newTraceNames(t)
	service := n.service
	env := append(o.env(registryURL), "RELAY_HOOK_URL", hook.URL, "RELAY_HOOK_TIMEOUT", "500ms",
		"RELAY_BLOCKING_ATTEMPTS", "0", "RELAY_RETRY_TIERS", "1s,2s")
	s := newScenarioOn(t, n.source, n.group, 1, append(env, tracingEnv(service, "http/protobuf")...)...)

	traceID, parentID := randomHex(t, 16), randomHex(t, 8)
	producerSpan(t, n.producer, traceID, parentID)
	msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &s.src.topic, Partition: 0}, Key: []byte("k"),
		Value:   o.value(t, 3, map[string]any{"id": "traced", "amount": int64(1), "currency": "EUR"}),
		Headers: []kafka.Header{{Key: "traceparent", Value: []byte("00-" + traceID + "-" + parentID + "-01")}}}
	deliver(t, []*kafka.Message{msg})
	r := startRelay(t, "relay", s.env(n.txn))
	waitSettled(t, s, 60*time.Second)
	r.stop() // flushes the spans

	outs := readCommitted(t, s.output, 1)
	if len(outs) != 1 {
		t.Fatalf("%d outputs, want 1", len(outs))
	}
	tp, _ := envelope.Lookup(toEnvelopeHeaders(outs[0].Headers), "traceparent")
	if !strings.HasPrefix(string(tp), "00-"+traceID+"-") {
		t.Errorf("the output carries traceparent %q, not the record's trace %s", tp, traceID)
	}
	mu.Lock()
	for i, h := range hookTraces {
		if !strings.HasPrefix(h, "00-"+traceID+"-") {
			t.Errorf("hook call %d carried traceparent %q, not the record's trace", i+1, h)
		}
	}
	mu.Unlock()

	// The producer's, 3 process, 3 send and 3 hook spans (and a registry
	// lookup).
	tr := waitJaegerTrace(t, traceID, 10)
	if _, ok := tr.Span("send orders"); !ok {
		t.Errorf("the producer's span is not in the trace: %v", spanNames(tr))
	}
	for _, sp := range tr.Spans {
		if sp.Service == service && strings.HasPrefix(sp.Name, "process ") &&
			(sp.Tags["messaging.system"] != "kafka" || sp.Tags["messaging.operation.type"] != "process") {
			t.Errorf("%s: tags %v", sp.Name, sp.Tags)
		}
	}
	// The chain: producer → source attempt → send to tier 1s → its attempt
	// → send to tier 2s → its attempt → send to the output, whose record
	// carries that last span's context.
	child := func(parent, prefix string) jaegerSpan {
		t.Helper()
		for _, sp := range tr.Spans {
			if sp.Service == service && sp.ParentSpanID == parent && strings.HasPrefix(sp.Name, prefix) {
				return sp
			}
		}
		t.Fatalf("no %q span under %s: %v", prefix, parent, spanNames(tr))
		return jaegerSpan{}
	}
	first := child(parentID, "process "+n.source)
	second := child(child(first.SpanID, "send "+n.source+".retry.").SpanID, "process "+n.source+".retry.")
	third := child(child(second.SpanID, "send "+n.source+".retry.").SpanID, "process "+n.source+".retry.")
	out := child(third.SpanID, "send "+s.output)
	if first.Tags["relay.outcome"] != "retry" || third.Tags["relay.outcome"] != "processed" {
		t.Errorf("outcomes %q then %q, want retry … processed", first.Tags["relay.outcome"], third.Tags["relay.outcome"])
	}
	if out.Tags["messaging.operation.type"] != "send" || !strings.Contains(string(tp), "-"+out.SpanID+"-") {
		t.Errorf("output send span %s (tags %v); the output carries %q", out.SpanID, out.Tags, tp)
	}
	hookSpans := 0
	for _, sp := range tr.Spans {
		if sp.Service == service && strings.HasPrefix(sp.Name, "hook ") && sp.Tags["span.kind"] == "client" {
			hookSpans++
		}
	}
	if hookSpans != 3 {
		t.Errorf("%d hook client spans, want 3: %v", hookSpans, spanNames(tr))
	}
	keepTraceID(t, traceID)
}

// traceNames are the names TestTraceFollowsARecordThroughTiers gives its
// services, source topic, group and transactional id.
type traceNames struct{ service, producer, source, group, txn string }

// newTraceNames makes names of the test's own, unless
// RELAY_TEST_TRACE_PICTURE is set. Then the test runs for
// scripts/trace-picture.sh, against a Jaeger of the script's own, and its
// trace is the picture in docs/TRACING.md: the services are relay and
// orders-producer, the topic orders-<random>, the group relay-<random>
// (still unique on the shared broker).
func newTraceNames(t *testing.T) traceNames {
	if os.Getenv("RELAY_TEST_TRACE_PICTURE") == "" {
		service := uniq(t, "svc")
		return traceNames{service, service + "-producer", uniq(t, "src"), uniq(t, "grp"), uniq(t, "txn")}
	}
	r := randomHex(t, 3)
	return traceNames{"relay", "orders-producer", "orders-" + r, "relay-" + r, "relay-" + r + "-0"}
}

// keepTraceID writes a passing test's trace id to the file that
// RELAY_TEST_TRACE_PICTURE names, when it is set, for the script to fetch.
func keepTraceID(t *testing.T, traceID string) {
	t.Helper()
	path := os.Getenv("RELAY_TEST_TRACE_PICTURE")
	if path == "" || t.Failed() {
		return
	}
	if err := os.WriteFile(path, []byte(traceID+"\n"), 0o600); err != nil {
		t.Fatalf("keeping the trace id: %v", err)
	}
}

// spanNames lists a trace's spans for messages.
func spanNames(tr jaegerTrace) []string {
	out := make([]string, 0, len(tr.Spans))
	for _, sp := range tr.Spans {
		out = append(out, sp.Service+":"+sp.Name+"("+sp.SpanID+"←"+sp.ParentSpanID+")")
	}
	return out
}

// TestQuarantineTraceAndReplayLink: a record quarantined for its schema
// version has a process span with its error.type in the backend (OTLP over
// gRPC); relay quarantine show names the trace; after relay replay, the
// replay record's trace links back to the quarantined record's trace, and
// the replayed record's process span is in the replay's trace.
func TestQuarantineTraceAndReplayLink(t *testing.T) {
	requireJaeger(t)
	o := registerOrders(t)
	service := uniq(t, "svc")
	s := newScenario(t, 1, append(o.env(registryURL), tracingEnv(service, "grpc")...)...)
	deliver(t, []*kafka.Message{{TopicPartition: kafka.TopicPartition{Topic: &s.src.topic, Partition: 0}, Key: []byte("k"),
		Value: o.value(t, 1, map[string]any{"id": "old", "amount": int64(1)})}})
	env := s.env(uniq(t, "txn"))
	r := startRelay(t, "relay", env)
	waitSettled(t, s, 60*time.Second)

	qs := readCommitted(t, s.quarantine, 1)
	if len(qs) != 1 {
		t.Fatalf("%d quarantined records, want 1", len(qs))
	}
	hs := toEnvelopeHeaders(qs[0].Headers)
	tp, _ := envelope.Lookup(hs, "traceparent")
	id, _ := envelope.Lookup(hs, envelope.FailureID)
	parts := strings.Split(string(tp), "-")
	if len(parts) != 4 {
		t.Fatalf("the quarantine record carries traceparent %q", tp)
	}
	traceID := parts[1]
	tr := waitJaegerTrace(t, traceID, 1)
	sp, ok := tr.Span("process " + s.src.topic)
	if !ok || sp.Tags["error.type"] != "SCHEMA_UNSUPPORTED" || sp.Tags["relay.outcome"] != "quarantined" {
		t.Fatalf("no quarantined process span with error.type SCHEMA_UNSUPPORTED: %v %v", spanNames(tr), sp.Tags)
	}
	out, err := relayCmd(t, env, "quarantine", "show", string(id))
	if err != nil || !strings.Contains(string(out), traceID) {
		t.Errorf("quarantine show does not name the trace %s (%v):\n%s", traceID, err, out)
	}

	since := time.Now().Add(-time.Second)
	replayEnv := map[string]string{}
	for k, v := range env {
		replayEnv[k] = v
	}
	replayEnv["OTEL_SERVICE_NAME"] = service + "-replay"
	// The record fails again (its version is still not accepted): the
	// replay may stop on its repeat-failure threshold (exit 3).
	out, err = relayCmd(t, replayEnv, "replay", "--ids", string(id), "--reason", "traced", "--wait", "60s", "--progress", "none")
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 3) {
		t.Fatalf("relay replay: %v\n%s", err, out)
	}
	r.stop()
	traces := waitJaegerTraces(t, service+"-replay", nil, since, 1)
	var publish jaegerSpan
	var replayTrace jaegerTrace
	for _, rt := range traces {
		for _, sp := range rt.Spans {
			// The replay command's send span, not relay's send spans
			// of the same trace (the replayed record's outputs).
			if sp.Service == service+"-replay" && strings.HasPrefix(sp.Name, "send ") {
				publish, replayTrace = sp, rt
			}
		}
	}
	if publish.SpanID == "" {
		t.Fatalf("no send span from relay replay in %d traces", len(traces))
	}
	linked := false
	for _, ref := range append(publish.Links, publish.References...) {
		linked = linked || ref.TraceID == traceID
	}
	if !linked {
		t.Errorf("the replay's send span does not link to the quarantined record's trace %s: links %v refs %v", traceID, publish.Links, publish.References)
	}
	full := waitJaegerTrace(t, replayTrace.TraceID, 2)
	found := false
	for _, sp := range full.Spans {
		found = found || (sp.Service == service && sp.ParentSpanID == publish.SpanID && strings.HasPrefix(sp.Name, "process "))
	}
	if !found {
		t.Errorf("the replayed record's process span is not the publish span's child: %v", spanNames(full))
	}
}

// TestCollectorDownLeavesRelayAlone: with the OTLP endpoint unreachable,
// relay processes every record exactly once and stops gracefully (exit
// 0) within its bound: spans are dropped, never waited for, and counted.
func TestCollectorDownLeavesRelayAlone(t *testing.T) {
	const partitions = 3
	s := newScenario(t, partitions)
	s.src.produce(t, 3000)
	addr := freeAddr(t)
	r := startRelay(t, "relay", s.env(uniq(t, "txn"), "RELAY_HTTP_ADDR", addr,
		"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc",
		"OTEL_EXPORTER_OTLP_TIMEOUT", "500", "OTEL_BSP_SCHEDULE_DELAY", "100"))
	assertExactlyOnce(t, s.src, s.output, s.group, partitions)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if v, _ := scrapeMetric(addr, "relay_tracing_spans_dropped_total", ""); v > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("relay_tracing_spans_dropped_total stayed 0 with the collector away")
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.stop()
}
