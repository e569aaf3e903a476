package tracing

import (
	"context"
	"errors"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// failingExporter refuses every export, like an unreachable collector.
type failingExporter struct{}

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("collector unreachable")
}

func (failingExporter) Shutdown(context.Context) error { return nil }

// Spans past the queue bound, and spans of failed exports, are counted as
// dropped; exported ones are not.
func TestDroppedSpansAreCounted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		exp     sdktrace.SpanExporter
		limit   int64
		spans   int
		dropped int64
	}{
		{"exported", tracetest.NewInMemoryExporter(), 100, 10, 0},
		{"past the queue", tracetest.NewInMemoryExporter(), 3, 10, 7},
		{"export failed", failingExporter{}, 100, 10, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &drops{limit: tc.limit}
			// A synchronous processor never frees the queue while spans
			// end: the bound is what the test sees.
			sp := countingProcessor{sdktrace.NewBatchSpanProcessor(countingExporter{tc.exp, d}, sdktrace.WithMaxQueueSize(int(tc.limit)),
				sdktrace.WithBatchTimeout(1<<40)), d}
			p := &Provider{sdk: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp)), drops: d}
			tr := p.Tracer("t")
			for range tc.spans {
				_, s := tr.Start(context.Background(), "s")
				s.End()
			}
			_ = p.Shutdown(context.Background())
			if got := p.Dropped(); got != tc.dropped {
				t.Errorf("dropped %d, want %d", got, tc.dropped)
			}
			if d.pending.Load() != 0 {
				t.Errorf("%d spans still pending after shutdown", d.pending.Load())
			}
		})
	}
}
