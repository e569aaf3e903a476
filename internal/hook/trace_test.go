package hook

import (
	"context"
	"net/http"
	"net/http/httptest"
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
	if _, err := New(srv.URL, time.Second, 1, tp).Call(ctx, &Request{MessageID: "o/0/1"}); err != nil {
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
