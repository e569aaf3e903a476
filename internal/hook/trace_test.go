package hook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"relay/internal/tracing"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// With a tracer provider the hook call is a client span, a child of the
// record's span, and the request carries its traceparent.
func TestHookRequestCarriesTraceparent(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("traceparent")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "process orders")
	if _, err := New(srv.URL, time.Second, 1, tp, nil).Call(ctx, &Request{MessageID: "o/0/1"}); err != nil {
		t.Fatal(err)
	}
	parent.End()
	ended := spans.Ended()
	if len(ended) != 2 || ended[0].Name() != "hook POST" || ended[0].Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("spans %v", ended)
	}
	client := ended[0].SpanContext()
	if want := "00-" + client.TraceID().String() + "-" + client.SpanID().String() + "-01"; got != want {
		t.Fatalf("traceparent %q, want %q", got, want)
	}
}

// OTEL_PROPAGATORS chooses what the hook's request carries: with b3
// asked for, the client span's B3 context beside its traceparent.
func TestHookRequestCarriesThePropagatorsAskedFor(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	prop, err := tracing.Env{"OTEL_PROPAGATORS": "tracecontext,b3"}.Propagation()
	if err != nil {
		t.Fatal(err)
	}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "process orders")
	if _, err := New(srv.URL, time.Second, 1, tp, prop.TextMap).Call(ctx, &Request{MessageID: "o/0/1"}); err != nil {
		t.Fatal(err)
	}
	parent.End()
	client := spans.Ended()[0].SpanContext()
	if want := client.TraceID().String() + "-" + client.SpanID().String() + "-1"; got.Get("b3") != want || got.Get("traceparent") == "" {
		t.Fatalf("b3 %q traceparent %q, want b3 %q and a traceparent", got.Get("b3"), got.Get("traceparent"), want)
	}
}
