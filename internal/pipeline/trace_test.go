package pipeline

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"relay/internal/envelope"
	"relay/internal/tiers"
	"relay/internal/tracing"
	"relay/internal/txn"
)

// traced is a machine that records its spans in rec.
func traced(a Admitter, now *time.Time) (*Machine, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	m, _ := newMachine(a, now)
	m.tracer = tracing.NewWith(rec).Tracer(TracerName)
	m.spans = newSpanOpts(Clients{Broker: "kafka-0.kafka:9092", ConsumerID: "relay-consumer", ProducerID: "relay-producer"}, nil)
	return m, rec
}

func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func traceparentOf(t *testing.T, o txn.Output) trace.SpanContext {
	t.Helper()
	tp, _ := envelope.Lookup(o.Headers, envelope.TraceParent)
	ts, _ := envelope.Lookup(o.Headers, envelope.TraceState)
	sc := tracing.Parent(tp, ts)
	if !sc.IsValid() {
		t.Fatalf("output to %s carries no valid traceparent: %v", o.Topic, o.Headers)
	}
	return sc
}

// ofKind are the spans of kind among spans, in the order they ended.
func ofKind(spans []sdktrace.ReadOnlySpan, kind trace.SpanKind) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == kind {
			out = append(out, s)
		}
	}
	return out
}

// A record with a traceparent gets a process span whose parent it is; its
// output gets a send span, the process span's child, whose context the
// output carries.
func TestProcessSpanContinuesTheRecordsTrace(t *testing.T) {
	now := t0
	m, spans := traced(nil, &now)
	outs, err := m.Handle(context.Background(), source(7))
	if err != nil || len(outs) != 1 {
		t.Fatal(outs, err)
	}
	ended := spans.Ended()
	process, sends := ofKind(ended, trace.SpanKindConsumer), ofKind(ended, trace.SpanKindProducer)
	if len(ended) != 2 || len(process) != 1 || len(sends) != 1 {
		t.Fatalf("%d spans, want a process and a send span", len(ended))
	}
	s := process[0]
	if s.Name() != "process orders" || s.SpanKind() != trace.SpanKindConsumer {
		t.Fatalf("span %q kind %v", s.Name(), s.SpanKind())
	}
	if got := s.Parent().SpanID().String(); got != "00f067aa0ba902b7" || !s.Parent().IsRemote() {
		t.Fatalf("parent %s, want the record's 00f067aa0ba902b7", got)
	}
	if got := s.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("trace %s", got)
	}
	want := map[attribute.Key]string{AttrSystem: "kafka", AttrOperation: "process", AttrOperationNam: "process",
		AttrDestination: "orders", AttrPartitionID: "3", AttrGroup: "relay", AttrKey: "k1", AttrOutcome: "processed", AttrMessageID: "orders/3/7",
		"server.address": "kafka-0.kafka", AttrClientID: "relay-consumer"}
	for k, v := range want {
		if got, ok := attrOf(s, k); !ok || got.String() != v {
			t.Errorf("%s = %q, want %q", k, got.String(), v)
		}
	}
	if got, _ := attrOf(s, AttrOffset); got.AsInt64() != 7 {
		t.Errorf("offset %v", got.String())
	}
	send := sends[0]
	if send.Name() != "send orders.valid" || send.Parent().SpanID() != s.SpanContext().SpanID() {
		t.Fatalf("send span %q, parent %v; want send orders.valid, the process span's child", send.Name(), send.Parent())
	}
	for k, v := range map[attribute.Key]string{AttrSystem: "kafka", AttrOperation: "send", AttrDestination: "orders.valid",
		AttrPartitionID: "3", AttrMessageID: "orders/3/7", "server.address": "kafka-0.kafka", AttrClientID: "relay-producer"} {
		if got, ok := attrOf(send, k); !ok || got.String() != v {
			t.Errorf("send span %s = %q, want %q", k, got.String(), v)
		}
	}
	if sc := traceparentOf(t, outs[0]); sc.TraceID() != s.SpanContext().TraceID() || sc.SpanID() != send.SpanContext().SpanID() {
		t.Fatalf("output traceparent %v, want the send span's %v", sc, send.SpanContext())
	}
}

// A record without a traceparent starts a trace; a key that is not short
// text is left out.
func TestProcessSpanWithoutTraceparentIsARoot(t *testing.T) {
	now := t0
	m, spans := traced(nil, &now)
	rec := source(8)
	rec.Headers, rec.Key = nil, []byte{0xff, 0xfe}
	if _, err := m.Handle(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	s := ofKind(spans.Ended(), trace.SpanKindConsumer)[0]
	if s.Parent().IsValid() {
		t.Fatalf("parent %v, want none", s.Parent())
	}
	if _, ok := attrOf(s, AttrKey); ok {
		t.Fatal("a binary key is on the span")
	}
}

// A record without a traceparent starts its own trace even when the
// context it is handled in holds a span (that span is not its trace).
func TestProcessSpanIgnoresASpanInTheContext(t *testing.T) {
	now := t0
	m, spans := traced(nil, &now)
	rec := source(9)
	rec.Headers = nil
	outer := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{9}, TraceFlags: trace.FlagsSampled})
	if _, err := m.Handle(trace.ContextWithSpanContext(context.Background(), outer), rec); err != nil {
		t.Fatal(err)
	}
	s := ofKind(spans.Ended(), trace.SpanKindConsumer)[0]
	if s.Parent().IsValid() || s.SpanContext().TraceID() == outer.TraceID() {
		t.Fatalf("parent %v, trace %v: want a new root", s.Parent(), s.SpanContext().TraceID())
	}
}

// A record that fails through two tiers and then passes is one trace:
// one process span per pass, each the child of the send span of the pass
// before, and every record written on the way carries the trace.
func TestTiersThenProcessedIsOneTrace(t *testing.T) {
	now := t0
	a := &scriptedAdmitter{}
	m, spans := traced(a, &now)
	fail := func() {
		a.errs = a.errs[:0]
		for range 10 {
			a.errs = append(a.errs, tiers.Failf(tiers.CauseRegistryUnavailable, "503"))
		}
	}
	rec := source(7)
	for pass := range 3 {
		if pass < 2 {
			fail()
		} else {
			a.errs = nil
		}
		outs, err := m.Handle(context.Background(), rec)
		if err != nil || len(outs) != 1 {
			t.Fatalf("pass %d: %v %v", pass, outs, err)
		}
		o := outs[0]
		if pass < 2 && o.Topic == "orders.valid" || pass == 2 && o.Topic != "orders.valid" {
			t.Fatalf("pass %d went to %s", pass, o.Topic)
		}
		if sc := traceparentOf(t, o); sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Fatalf("pass %d: %s carries trace %s", pass, o.Topic, sc.TraceID())
		}
		now = now.Add(10 * time.Minute)
		rec = &txn.Record{Topic: o.Topic, Partition: 3, Offset: int64(pass), Key: o.Key, Value: o.Value, Headers: o.Headers, Timestamp: o.Timestamp}
	}
	ended, sends := ofKind(spans.Ended(), trace.SpanKindConsumer), ofKind(spans.Ended(), trace.SpanKindProducer)
	if len(ended) != 3 || len(sends) != 3 {
		t.Fatalf("%d process spans and %d send spans, want 3 of each", len(ended), len(sends))
	}
	for i, s := range ended {
		if s.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Fatalf("span %d in trace %s", i, s.SpanContext().TraceID())
		}
		want := "retry"
		if i == 2 {
			want = "processed"
		} else if v, _ := attrOf(s, AttrErrorType); v.AsString() != "SCHEMA_REGISTRY_UNAVAILABLE" || s.Status().Code.String() != "Error" {
			t.Errorf("span %d: error.type %q status %v", i, v.AsString(), s.Status())
		} else if !hasException(s, "SCHEMA_REGISTRY_UNAVAILABLE", s.Status().Description) {
			t.Errorf("span %d: no exception event of type SCHEMA_REGISTRY_UNAVAILABLE with the status's message: %v", i, s.Events())
		}
		if v, _ := attrOf(s, AttrOutcome); v.AsString() != want {
			t.Errorf("span %d: outcome %q, want %q", i, v.AsString(), want)
		}
		if sends[i].Parent().SpanID() != s.SpanContext().SpanID() {
			t.Errorf("send span %d's parent is %s, want its pass's process span", i, sends[i].Parent().SpanID())
		}
		if i > 0 && s.Parent().SpanID() != sends[i-1].SpanContext().SpanID() {
			t.Errorf("span %d's parent is %s, want the send span of the pass before (%s)", i, s.Parent().SpanID(), sends[i-1].SpanContext().SpanID())
		}
	}
	if got := ended[2].Name(); got != "process orders.retry.5m" && got != "process orders.retry.30s" {
		t.Errorf("last span %q", got)
	}
}

// Without a tracer nothing is recorded and records carry the trace
// context they came with, as they are.
func TestWithoutTracerTheTraceparentIsCopied(t *testing.T) {
	now := t0
	m, _ := newMachine(nil, &now)
	outs, err := m.Handle(context.Background(), source(7))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := envelope.Lookup(outs[0].Headers, envelope.TraceParent); string(v) != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("traceparent %q", v)
	}
}

// hasException says whether s has an exception event of type typ and
// message msg (the OpenTelemetry conventions' record of a failure).
func hasException(s sdktrace.ReadOnlySpan, typ, msg string) bool {
	for _, e := range s.Events() {
		got := map[attribute.Key]string{}
		for _, kv := range e.Attributes {
			got[kv.Key] = kv.Value.AsString()
		}
		if e.Name == "exception" && got["exception.type"] == typ && got["exception.message"] == msg && msg != "" {
			return true
		}
	}
	return false
}
