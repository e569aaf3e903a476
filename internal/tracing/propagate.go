package tracing

import (
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The W3C trace-context headers.
const (
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// Propagator is the one propagator relay uses: W3C trace context. It
// carries the trace into the hook's requests; records go through Parent
// and ContextOf, which read and write what it does without its context
// allocations (every record pays for them, traced or not).
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// The traceparent of version 00: "00-" trace-id "-" parent-id "-" flags,
// and the offsets of its fields.
const (
	parentLen   = 55
	traceIDAt   = 3
	spanIDAt    = 36
	flagsAt     = 53
	lastVersion = 0xfe // ff is invalid; versions after 00 may append fields
	knownFlags  = trace.FlagsSampled | trace.FlagsRandom
)

// Parent is the span context a record's traceparent and tracestate
// carry, read as Propagator reads them (a test holds the two together):
// invalid when parent is absent or malformed; a tracestate that does not
// parse is left out, the parent still counts.
func Parent(parent, state []byte) trace.SpanContext {
	if len(parent) < parentLen || parent[2] != '-' || parent[spanIDAt-1] != '-' || parent[flagsAt-1] != '-' {
		return trace.SpanContext{}
	}
	var version, flags [1]byte
	var scc trace.SpanContextConfig
	if !unhex(version[:], parent[:2]) || version[0] > lastVersion ||
		!unhex(scc.TraceID[:], parent[traceIDAt:spanIDAt-1]) ||
		!unhex(scc.SpanID[:], parent[spanIDAt:flagsAt-1]) ||
		!unhex(flags[:], parent[flagsAt:parentLen]) {
		return trace.SpanContext{}
	}
	rest := parent[parentLen:]
	if len(rest) > 0 && rest[0] != '-' {
		return trace.SpanContext{}
	}
	// Version 00 has nothing after the flags (a lone "-" ends the flags
	// field, as the propagator splits it) and no reserved flag bits.
	if version[0] == 0 && (len(rest) > 1 || flags[0] > 3) {
		return trace.SpanContext{}
	}
	scc.TraceFlags = trace.TraceFlags(flags[0]) & knownFlags
	scc.Remote = true
	if len(state) > 0 {
		scc.TraceState, _ = trace.ParseTraceState(string(state))
	}
	sc := trace.NewSpanContext(scc)
	if !sc.IsValid() { // an all-zero trace or span id
		return trace.SpanContext{}
	}
	return sc
}

// unhex decodes lower-case hex src into dst (len(src) = 2·len(dst)).
func unhex(dst, src []byte) bool {
	for i := range dst {
		hi, ok1 := nibble(src[2*i])
		lo, ok2 := nibble(src[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func nibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Context is the W3C trace context of a span, as the header values of the
// records written under it: traceparent, and tracestate (nil when empty).
// Both are nil for an invalid span context. The values are shared by the
// records that carry them: read only.
type Context struct {
	Parent, State []byte
	// Foreign are the headers of the other propagators OTEL_PROPAGATORS
	// asks for (b3, jaeger, …): see Propagation.
	Foreign []Header
	prop    *Propagation
}

// Replaces says whether a record written under c drops a header named key
// that its source record carried: a foreign propagator's header, when c
// writes the foreign propagators' own.
func (c Context) Replaces(key string) bool { return c.Foreign != nil && c.prop.Foreign(key) }

const hexDigits = "0123456789abcdef"

// ContextOf is the trace context of sc, for the records written under it.
func ContextOf(sc trace.SpanContext) Context {
	if !sc.IsValid() {
		return Context{}
	}
	b := make([]byte, parentLen)
	copy(b, "00-")
	tid, sid := sc.TraceID(), sc.SpanID()
	putHex(b[traceIDAt:], tid[:])
	b[spanIDAt-1] = '-'
	putHex(b[spanIDAt:], sid[:])
	b[flagsAt-1] = '-'
	putHex(b[flagsAt:], []byte{byte(sc.TraceFlags() & knownFlags)})
	c := Context{Parent: b}
	if ts := sc.TraceState(); ts.Len() > 0 {
		c.State = []byte(ts.String())
	}
	return c
}

func putHex(dst, src []byte) {
	for i, v := range src {
		dst[2*i], dst[2*i+1] = hexDigits[v>>4], hexDigits[v&0x0f]
	}
}
