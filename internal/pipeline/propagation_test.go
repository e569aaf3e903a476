package pipeline

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"relay/internal/envelope"
	"relay/internal/tracing"
	"relay/internal/txn"
)

// b3Traced is traced with OTEL_PROPAGATORS=tracecontext,baggage,b3.
func b3Traced(t *testing.T, now *time.Time) (*Machine, func() []trace.SpanContext) {
	t.Helper()
	prop, err := tracing.Env{"OTEL_PROPAGATORS": "tracecontext,baggage,b3"}.Propagation()
	if err != nil {
		t.Fatal(err)
	}
	m, rec := traced(nil, now)
	m.spans.prop = prop
	return m, func() []trace.SpanContext {
		var out []trace.SpanContext
		for _, s := range ofKind(rec.Ended(), trace.SpanKindConsumer) {
			out = append(out, s.Parent())
		}
		return out
	}
}

// A source record that carries only a B3 context is continued in its
// trace when OTEL_PROPAGATORS asks for b3; its output carries the send
// span's context both ways, and not the source's stale B3 header.
func TestB3ContextIsReadAndWritten(t *testing.T) {
	now := t0
	m, parents := b3Traced(t, &now)
	rec := source(9)
	rec.Headers = []txn.Header{{Key: "b3", Value: []byte("80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1")}, {Key: "other", Value: []byte("x")}}
	outs, err := m.Handle(context.Background(), rec)
	if err != nil || len(outs) != 1 {
		t.Fatal(outs, err)
	}
	if p := parents(); len(p) != 1 || p[0].TraceID().String() != "80f198ee56343ba864fe8b2a57d3eff7" || p[0].SpanID().String() != "e457b5a2e4d86bd1" {
		t.Fatalf("process span's parent %v, want the B3 context", p)
	}
	sc := traceparentOf(t, outs[0])
	if sc.TraceID().String() != "80f198ee56343ba864fe8b2a57d3eff7" {
		t.Fatalf("output traceparent %v, want the B3 trace", sc)
	}
	var b3s []string
	for k, v := range envelope.All(outs[0].Headers) {
		if k == "b3" {
			b3s = append(b3s, string(v))
		}
	}
	want := sc.TraceID().String() + "-" + sc.SpanID().String() + "-1"
	if len(b3s) != 1 || b3s[0] != want {
		t.Fatalf("output b3 headers %q, want only %q (the send span's)", b3s, want)
	}
	if v, ok := envelope.Lookup(outs[0].Headers, "other"); !ok || string(v) != "x" {
		t.Fatal("the record's own header was dropped")
	}
}

// traceparent wins over B3 when a record carries both: relay's own hops
// write both, and read the W3C one.
func TestTraceparentWinsOverB3(t *testing.T) {
	now := t0
	m, parents := b3Traced(t, &now)
	rec := source(10)
	rec.Headers = append(rec.Headers, txn.Header{Key: "b3", Value: []byte("80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1")})
	if _, err := m.Handle(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if p := parents(); len(p) != 1 || p[0].SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("process span's parent %v, want the traceparent's", p)
	}
}

// Without b3 asked for, a B3 header is the record's own: not read, and
// carried as it is.
func TestB3IsTheRecordsOwnByDefault(t *testing.T) {
	now := t0
	m, _ := traced(nil, &now)
	rec := source(11)
	rec.Headers = []txn.Header{{Key: "b3", Value: []byte("80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1")}}
	outs, err := m.Handle(context.Background(), rec)
	if err != nil || len(outs) != 1 {
		t.Fatal(outs, err)
	}
	if sc := traceparentOf(t, outs[0]); sc.TraceID().String() == "80f198ee56343ba864fe8b2a57d3eff7" {
		t.Fatal("b3 was read without OTEL_PROPAGATORS asking for it")
	}
	if v, _ := envelope.Lookup(outs[0].Headers, "b3"); string(v) != "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1" {
		t.Fatalf("b3 header %q, want the record's own", v)
	}
}
