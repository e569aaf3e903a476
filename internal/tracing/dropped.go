package tracing

import (
	"context"
	"strconv"
	"sync/atomic"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// defaultMaxQueue is the SDK's OTEL_BSP_MAX_QUEUE_SIZE default.
const defaultMaxQueue = 2048

// drops counts the spans relay made and never exported: those past the
// bound on spans waiting for export (the batch processor's queue, which
// would otherwise drop them silently) and those of exports that failed
// (an unreachable collector).
type drops struct {
	pending atomic.Int64 // handed to the batch processor, not yet exported
	dropped atomic.Int64
	limit   int64
}

// countingProcessor bounds what it hands the batch processor to the
// processor's own queue size, so the processor never drops a span unseen:
// a span past the bound is dropped here, and counted.
type countingProcessor struct {
	sdktrace.SpanProcessor
	d *drops
}

func (p countingProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return // not exported anyway
	}
	if p.d.pending.Add(1) > p.d.limit {
		p.d.pending.Add(-1)
		p.d.dropped.Add(1)
		return
	}
	p.SpanProcessor.OnEnd(s)
}

// countingExporter counts the spans of failed exports as dropped.
type countingExporter struct {
	sdktrace.SpanExporter
	d *drops
}

func (e countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.d.pending.Add(-int64(len(spans)))
	if err != nil {
		e.d.dropped.Add(int64(len(spans)))
	}
	return err
}

// queueLimit is OTEL_BSP_MAX_QUEUE_SIZE, or the SDK's default.
func (e Env) queueLimit() int64 {
	if n, err := strconv.ParseInt(e["OTEL_BSP_MAX_QUEUE_SIZE"], 10, 64); err == nil && n > 0 {
		return n
	}
	return defaultMaxQueue
}

// Dropped is how many spans were made and never exported (0 with tracing
// off): a full export queue, or a collector that did not take them.
func (p *Provider) Dropped() int64 {
	if p == nil || p.drops == nil {
		return 0
	}
	return p.drops.dropped.Load()
}
