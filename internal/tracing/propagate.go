package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace-context headers.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// Propagator is the one propagator relay uses: W3C trace context.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Headers reads header values by name (a record's headers, whatever their
// type).
type Headers func(key string) string

// Get implements propagation.TextMapCarrier.
func (h Headers) Get(key string) string { return h(key) }

// Set implements propagation.TextMapCarrier; extraction does not set.
func (Headers) Set(string, string) {}

// Keys implements propagation.TextMapCarrier.
func (Headers) Keys() []string { return []string{TraceParent, TraceState} }

// Remote is the span context the traceparent and tracestate of get carry;
// invalid when there is none or it does not parse.
func Remote(get Headers) trace.SpanContext {
	return trace.SpanContextFromContext(Propagator.Extract(context.Background(), get))
}

// Context is the W3C trace context of sc, as headers: traceparent, and
// tracestate ("" when empty). Both are "" for an invalid sc.
type Context struct{ Parent, State string }

// Get implements propagation.TextMapCarrier.
func (c *Context) Get(key string) string {
	if key == TraceParent {
		return c.Parent
	}
	return c.State
}

// Set implements propagation.TextMapCarrier.
func (c *Context) Set(key, value string) {
	switch key {
	case TraceParent:
		c.Parent = value
	case TraceState:
		c.State = value
	}
}

// Keys implements propagation.TextMapCarrier.
func (c *Context) Keys() []string { return []string{TraceParent, TraceState} }

// ContextOf is the trace context of sc, for the records written under it.
func ContextOf(sc trace.SpanContext) Context {
	var c Context
	Propagator.Inject(trace.ContextWithSpanContext(context.Background(), sc), &c)
	return c
}
