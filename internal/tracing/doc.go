// Package tracing builds relay's OpenTelemetry TracerProvider from the
// standard OTEL_* variables only, and holds the W3C trace-context
// helpers the rest of relay shares: extracting a record's parent from its
// headers and writing a span's context into the headers of the records it
// writes.
//
// Without an endpoint (or with OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none) there is no provider: New returns a Provider
// whose Tracer is nil, and the callers skip every span, so a relay that
// does not trace spends nothing on it. With one, spans go through a
// BatchSpanProcessor (bounded queue, OTEL_BSP_* honoured), which drops
// spans when its queue is full and never blocks the caller.
package tracing
