package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The local stack's Jaeger (scripts/stack/jaeger.sh): its query API, and its
// OTLP/HTTP receiver, where relay sends its traces.
var (
	jaegerURL      = envOr("RELAY_TEST_JAEGER_URL", "http://127.0.0.1:16686")
	jaegerOTLPHTTP = envOr("RELAY_TEST_OTLP_HTTP", "http://127.0.0.1:4318")
)

// jaegerWait bounds how long a test waits for spans to become queryable:
// they arrive as the exporter sends them, batched, from several processes.
const jaegerWait = 30 * time.Second

// jaegerTrace is one trace as Jaeger's query API returns it.
type jaegerTrace struct {
	TraceID string // 32 lowercase hex digits
	Spans   []jaegerSpan
}

// jaegerSpan is one span of a trace. Tags are the span's attributes, and
// the few Jaeger derives from the span (span.kind, otel.status_code,
// otel.scope.name, error), each value as text: strings as they are,
// numbers and booleans as JSON writes them ("42", "true").
type jaegerSpan struct {
	TraceID      string // 32 lowercase hex digits
	SpanID       string // 16 lowercase hex digits
	ParentSpanID string // "" for a root span
	Name         string // the operation name
	Service      string // the process's (resource's) service.name
	Start        time.Time
	Duration     time.Duration
	Tags         map[string]string
	Process      map[string]string // resource attributes other than service.name
	// Links are the span's OTLP links, as trace and span ids: the query API
	// reports them as FOLLOWS_FROM references and drops their attributes.
	Links []jaegerRef
	// References are all of them as Jaeger reports them, the parent
	// (CHILD_OF) first.
	References []jaegerRef
}

type jaegerRef struct {
	Type    string // CHILD_OF or FOLLOWS_FROM
	TraceID string
	SpanID  string
}

// Span returns the trace's span named name; ok is false unless exactly one
// span has that name.
func (tr jaegerTrace) Span(name string) (s jaegerSpan, ok bool) {
	n := 0
	for _, sp := range tr.Spans {
		if sp.Name == name {
			s, n = sp, n+1
		}
	}
	return s, n == 1
}

// SpansNamed returns the trace's spans named name, in the API's order.
func (tr jaegerTrace) SpansNamed(name string) []jaegerSpan {
	var out []jaegerSpan
	for _, sp := range tr.Spans {
		if sp.Name == name {
			out = append(out, sp)
		}
	}
	return out
}

// jaegerGetTrace fetches one trace by id (GET /api/traces/{id}). found is
// false, with no error, while Jaeger holds no span of it.
func jaegerGetTrace(ctx context.Context, traceID string) (tr jaegerTrace, found bool, err error) {
	traces, status, err := jaegerQuery(ctx, "/api/traces/"+url.PathEscape(traceID))
	if status == http.StatusNotFound {
		return jaegerTrace{}, false, nil
	}
	if err != nil {
		return jaegerTrace{}, false, err
	}
	if len(traces) != 1 {
		return jaegerTrace{}, false, fmt.Errorf("jaeger: GET /api/traces/%s: %d traces in the answer", traceID, len(traces))
	}
	return traces[0], true, nil
}

// jaegerFindTraces finds the traces (up to 100, most recent first) with a
// span of service whose tags include every one of tags, among spans that
// started since since (the zero time: Jaeger's default lookback, two days)
// (GET /api/traces?service=…&tags=…). Each trace comes whole, not only its
// matching spans.
func jaegerFindTraces(ctx context.Context, service string, tags map[string]string, since time.Time) ([]jaegerTrace, error) {
	q := url.Values{"service": {service}, "limit": {"100"}}
	if len(tags) > 0 {
		b, err := json.Marshal(tags)
		if err != nil {
			return nil, err
		}
		q.Set("tags", string(b))
	}
	if !since.IsZero() {
		q.Set("start", strconv.FormatInt(since.UnixMicro(), 10))
	}
	traces, _, err := jaegerQuery(ctx, "/api/traces?"+q.Encode())
	return traces, err
}

// waitJaegerTrace polls until the trace has at least minSpans spans, and
// fails the test if it has not within jaegerWait.
func waitJaegerTrace(t *testing.T, traceID string, minSpans int) jaegerTrace {
	t.Helper()
	var last jaegerTrace
	var lastErr error
	pollJaeger(t, func(ctx context.Context) bool {
		tr, found, err := jaegerGetTrace(ctx, traceID)
		last, lastErr = tr, err
		return found && err == nil && len(tr.Spans) >= minSpans
	})
	if t.Failed() {
		t.Fatalf("trace %s: %d spans in Jaeger after %v, want at least %d (last error: %v)", traceID, len(last.Spans), jaegerWait, minSpans, lastErr)
	}
	return last
}

// waitJaegerTraces polls jaegerFindTraces until it finds at least n traces,
// and fails the test if it has not within jaegerWait.
func waitJaegerTraces(t *testing.T, service string, tags map[string]string, since time.Time, n int) []jaegerTrace {
	t.Helper()
	var last []jaegerTrace
	var lastErr error
	pollJaeger(t, func(ctx context.Context) bool {
		last, lastErr = jaegerFindTraces(ctx, service, tags, since)
		return lastErr == nil && len(last) >= n
	})
	if t.Failed() {
		t.Fatalf("service %s, tags %v: %d traces in Jaeger after %v, want at least %d (last error: %v)", service, tags, len(last), jaegerWait, n, lastErr)
	}
	return last
}

// pollJaeger calls try every 200 ms until it returns true, or marks the
// test failed (without stopping it) after jaegerWait.
func pollJaeger(t *testing.T, try func(ctx context.Context) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), jaegerWait)
	defer cancel()
	for {
		if try(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fail()
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// requireJaeger skips the test when Jaeger's query API does not answer, or
// fails it under RELAY_TEST_REQUIRE_BROKER=1 (make test, CI), as TestMain
// does for the broker.
func requireJaeger(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jaegerURL+"/api/services", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		err = fmt.Errorf("status %s", resp.Status)
	}
	msg := fmt.Sprintf("no Jaeger query API at %s (%v); start it with scripts/stack/up.sh", jaegerURL, err)
	if os.Getenv("RELAY_TEST_REQUIRE_BROKER") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// The query API's JSON (Jaeger's UI model), as far as the helpers read it.
type jaegerAPIResponse struct {
	Data   []jaegerAPITrace `json:"data"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

type jaegerAPITrace struct {
	TraceID   string                      `json:"traceID"`
	Spans     []jaegerAPISpan             `json:"spans"`
	Processes map[string]jaegerAPIProcess `json:"processes"`
}

type jaegerAPISpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64          `json:"startTime"` // µs since the epoch
	Duration  int64          `json:"duration"`  // µs
	Tags      []jaegerAPITag `json:"tags"`
	ProcessID string         `json:"processID"`
}

type jaegerAPIProcess struct {
	ServiceName string         `json:"serviceName"`
	Tags        []jaegerAPITag `json:"tags"`
}

type jaegerAPITag struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// jaegerQuery GETs path from the query API and converts the traces in its
// answer. status is the HTTP status, 0 when there was none.
func jaegerQuery(ctx context.Context, path string) (traces []jaegerTrace, status int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jaegerURL+path, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("jaeger: GET %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("jaeger: GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, fmt.Errorf("jaeger: GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	var r jaegerAPIResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, resp.StatusCode, fmt.Errorf("jaeger: GET %s: %w", path, err)
	}
	if len(r.Errors) > 0 {
		return nil, resp.StatusCode, fmt.Errorf("jaeger: GET %s: %v", path, r.Errors)
	}
	for _, at := range r.Data {
		tr, err := at.convert()
		if err != nil {
			return nil, resp.StatusCode, fmt.Errorf("jaeger: GET %s: %w", path, err)
		}
		traces = append(traces, tr)
	}
	return traces, resp.StatusCode, nil
}

func (at jaegerAPITrace) convert() (jaegerTrace, error) {
	tr := jaegerTrace{TraceID: fullTraceID(at.TraceID)}
	for _, as := range at.Spans {
		tags, err := tagMap(as.Tags)
		if err != nil {
			return jaegerTrace{}, fmt.Errorf("span %s: %w", as.SpanID, err)
		}
		proc, ok := at.Processes[as.ProcessID]
		if !ok {
			return jaegerTrace{}, fmt.Errorf("span %s: no process %q in the trace", as.SpanID, as.ProcessID)
		}
		ptags, err := tagMap(proc.Tags)
		if err != nil {
			return jaegerTrace{}, fmt.Errorf("process %s: %w", as.ProcessID, err)
		}
		s := jaegerSpan{
			TraceID:  fullTraceID(as.TraceID),
			SpanID:   as.SpanID,
			Name:     as.OperationName,
			Service:  proc.ServiceName,
			Start:    time.UnixMicro(as.StartTime),
			Duration: time.Duration(as.Duration) * time.Microsecond,
			Tags:     tags,
			Process:  ptags,
		}
		for i, r := range as.References {
			ref := jaegerRef{Type: r.RefType, TraceID: fullTraceID(r.TraceID), SpanID: r.SpanID}
			s.References = append(s.References, ref)
			// Jaeger puts the OTLP parent first, as CHILD_OF in the same trace.
			if i == 0 && ref.Type == "CHILD_OF" && ref.TraceID == s.TraceID {
				s.ParentSpanID = ref.SpanID
				continue
			}
			s.Links = append(s.Links, ref)
		}
		tr.Spans = append(tr.Spans, s)
	}
	return tr, nil
}

// tagMap turns Jaeger's typed tags into text: a string as it is, any other
// value (number, boolean) as its JSON.
func tagMap(tags []jaegerAPITag) (map[string]string, error) {
	m := make(map[string]string, len(tags))
	for _, tag := range tags {
		var s string
		if err := json.Unmarshal(tag.Value, &s); err == nil {
			m[tag.Key] = s
			continue
		}
		if len(tag.Value) == 0 {
			return nil, fmt.Errorf("tag %q has no value", tag.Key)
		}
		m[tag.Key] = string(tag.Value)
	}
	return m, nil
}

// fullTraceID pads a trace id to 32 hex digits: Jaeger's v1 API drops the
// leading zeros of a trace id whose upper half is zero.
func fullTraceID(id string) string {
	id = strings.ToLower(id)
	if len(id) < 32 {
		id = strings.Repeat("0", 32-len(id)) + id
	}
	return id
}

// randomHex returns n random bytes in hex: trace ids (16) and span ids (8).
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// postOTLP sends one ExportTraceServiceRequest in OTLP/HTTP's JSON encoding
// to the stack's OTLP receiver, as an SDK's exporter would.
func postOTLP(t *testing.T, request any) {
	t.Helper()
	body, err := json.Marshal(request)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, jaegerOTLPHTTP+"/v1/traces", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s/v1/traces: %v", jaegerOTLPHTTP, err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s/v1/traces: %s: %s", jaegerOTLPHTTP, resp.Status, answer)
	}
	// A partial success names the spans the receiver refused.
	var ps struct {
		PartialSuccess struct {
			RejectedSpans json.Number `json:"rejectedSpans"`
			ErrorMessage  string      `json:"errorMessage"`
		} `json:"partialSuccess"`
	}
	if err := json.Unmarshal(answer, &ps); err != nil && !errors.Is(err, io.EOF) && len(answer) > 0 {
		t.Fatalf("POST /v1/traces: answer %q: %v", answer, err)
	}
	if n := ps.PartialSuccess.RejectedSpans; n != "" && n != "0" {
		t.Fatalf("POST /v1/traces: %s spans rejected: %s", n, ps.PartialSuccess.ErrorMessage)
	}
}

// TestTracingBackendAnswers proves the stack's tracing backend end to end,
// without relay: a parent and a child span with a link, sent over OTLP/HTTP
// (JSON), come back from the query API by trace id and by service and tags,
// with their names, parentage, link, attributes and service.
func TestTracingBackendAnswers(t *testing.T) {
	requireJaeger(t)
	service := uniq(t, "svc")
	run := randomHex(t, 8)
	traceID, parentID, childID := randomHex(t, 16), randomHex(t, 8), randomHex(t, 8)
	linkedTrace, linkedSpan := randomHex(t, 16), randomHex(t, 8)
	start := time.Now().Add(-time.Second)
	nanos := func(d time.Duration) string { return strconv.FormatInt(start.Add(d).UnixNano(), 10) }
	str := func(k, v string) map[string]any {
		return map[string]any{"key": k, "value": map[string]any{"stringValue": v}}
	}

	// OTLP's JSON encoding: ids in hex, 64-bit integers as strings, enums
	// as numbers (kind 5: consumer, 1: internal).
	postOTLP(t, map[string]any{"resourceSpans": []any{map[string]any{
		"resource": map[string]any{"attributes": []any{
			str("service.name", service),
			str("service.instance.id", "it-1"),
		}},
		"scopeSpans": []any{map[string]any{
			"scope": map[string]any{"name": "relay/integration"},
			"spans": []any{
				map[string]any{
					"traceId": traceID, "spanId": parentID, "name": "it.receive", "kind": 5,
					"startTimeUnixNano": nanos(0), "endTimeUnixNano": nanos(300 * time.Millisecond),
					"attributes": []any{
						str("it.run", run),
						str("messaging.destination.name", "it-orders"),
						map[string]any{"key": "messaging.kafka.offset", "value": map[string]any{"intValue": "42"}},
					},
				},
				map[string]any{
					"traceId": traceID, "spanId": childID, "parentSpanId": parentID, "name": "it.handle", "kind": 1,
					"startTimeUnixNano": nanos(100 * time.Millisecond), "endTimeUnixNano": nanos(200 * time.Millisecond),
					"attributes": []any{
						map[string]any{"key": "it.retried", "value": map[string]any{"boolValue": true}},
					},
					"links": []any{map[string]any{"traceId": linkedTrace, "spanId": linkedSpan}},
				},
			},
		}},
	}}})

	tr := waitJaegerTrace(t, traceID, 2)
	if tr.TraceID != traceID || len(tr.Spans) != 2 {
		t.Fatalf("trace %s with %d spans, want %s with 2", tr.TraceID, len(tr.Spans), traceID)
	}
	parent, ok := tr.Span("it.receive")
	if !ok {
		t.Fatalf("no single span it.receive in %+v", tr.Spans)
	}
	child, ok := tr.Span("it.handle")
	if !ok {
		t.Fatalf("no single span it.handle in %+v", tr.Spans)
	}
	for _, s := range []jaegerSpan{parent, child} {
		if s.Service != service || s.Process["service.instance.id"] != "it-1" || s.TraceID != traceID {
			t.Errorf("span %s: service %q, process %v, trace %s; want %s, instance it-1, %s", s.Name, s.Service, s.Process, s.TraceID, service, traceID)
		}
	}
	if parent.SpanID != parentID || parent.ParentSpanID != "" || len(parent.Links) != 0 {
		t.Errorf("parent: id %s, parent %q, links %v; want %s, a root, no links", parent.SpanID, parent.ParentSpanID, parent.Links, parentID)
	}
	if got, want := parent.Duration, 300*time.Millisecond; got != want {
		t.Errorf("parent: duration %v, want %v", got, want)
	}
	if parent.Tags["it.run"] != run || parent.Tags["messaging.destination.name"] != "it-orders" ||
		parent.Tags["messaging.kafka.offset"] != "42" || parent.Tags["span.kind"] != "consumer" {
		t.Errorf("parent: tags %v", parent.Tags)
	}
	if child.SpanID != childID || child.ParentSpanID != parentID {
		t.Errorf("child: id %s, parent %q; want %s, %s", child.SpanID, child.ParentSpanID, childID, parentID)
	}
	if want := []jaegerRef{{Type: "FOLLOWS_FROM", TraceID: linkedTrace, SpanID: linkedSpan}}; fmt.Sprint(child.Links) != fmt.Sprint(want) {
		t.Errorf("child: links %v, want %v", child.Links, want)
	}
	if child.Tags["it.retried"] != "true" {
		t.Errorf("child: tags %v", child.Tags)
	}

	found := waitJaegerTraces(t, service, map[string]string{"it.run": run, "messaging.kafka.offset": "42"}, start.Add(-time.Minute), 1)
	if len(found) != 1 || found[0].TraceID != traceID || len(found[0].Spans) != 2 {
		t.Errorf("find by service and tags: %d traces %+v, want only %s with 2 spans", len(found), found, traceID)
	}
	if none, err := jaegerFindTraces(context.Background(), service, map[string]string{"it.run": "other"}, time.Time{}); err != nil || len(none) != 0 {
		t.Errorf("find with another tag value: %d traces, err %v; want none", len(none), err)
	}
}
