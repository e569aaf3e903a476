package tracing

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// EnvPropagators is the standard list of propagators (OTEL_PROPAGATORS).
const EnvPropagators = "OTEL_PROPAGATORS"

const defaultPropagators = "tracecontext,baggage"

// Propagation is what OTEL_PROPAGATORS asks for (tracecontext,baggage
// when unset): tracecontext, baggage, b3, b3multi, jaeger, xray, ottrace
// or none.
//
// The hook's requests carry what every propagator asked for writes. Records
// always carry W3C trace context (traceparent, tracestate), which relay
// reads on its own hops (tiers, replay); the other propagators asked for
// (b3, jaeger, xray, ottrace: the foreign ones) are read from a source
// record that carries no valid traceparent, and written on relay's
// records beside traceparent, in place of the source record's own.
type Propagation struct {
	// TextMap is every propagator asked for: the hook's requests.
	TextMap propagation.TextMapPropagator
	foreign propagation.TextMapPropagator // nil: none
	fields  map[string]bool               // foreign's header names
}

// W3C is the propagation of OTEL_PROPAGATORS unset.
var W3C = &Propagation{TextMap: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}

// Propagation parses OTEL_PROPAGATORS; an unknown name is an error naming
// the variable.
func (e Env) Propagation() (*Propagation, error) {
	v := strings.TrimSpace(e[EnvPropagators])
	if v == "" {
		return W3C, nil
	}
	var names, foreign []string
	for _, n := range strings.Split(v, ",") {
		n = strings.ToLower(strings.TrimSpace(n))
		names = append(names, n)
		if n != "tracecontext" && n != "baggage" && n != "none" {
			foreign = append(foreign, n)
		}
	}
	all, err := autoprop.TextMapPropagator(names...)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w (known: tracecontext, baggage, b3, b3multi, jaeger, xray, ottrace, none)", EnvPropagators, v, err)
	}
	p := &Propagation{TextMap: all}
	if len(foreign) > 0 && !strings.Contains(","+strings.Join(names, ",")+",", ",none,") {
		p.foreign, _ = autoprop.TextMapPropagator(foreign...) // known: all parsed above
		p.fields = map[string]bool{}
		for _, f := range p.foreign.Fields() {
			p.fields[strings.ToLower(f)] = true
		}
	}
	return p, nil
}

// Foreign says whether a header named key is one the foreign propagators
// write (compared without case, as they name them).
func (p *Propagation) Foreign(key string) bool {
	return p != nil && p.fields != nil && p.fields[strings.ToLower(key)]
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Extract is the span context the foreign propagators read from a
// record's headers (invalid without them, or when none of their headers
// is present). Only a record that carries one pays for more than a look
// at its header names.
func (p *Propagation) Extract(headers iter.Seq2[string, []byte]) trace.SpanContext {
	if p == nil || p.foreign == nil {
		return trace.SpanContext{}
	}
	var c foldCarrier
	for k, v := range headers {
		if p.Foreign(k) {
			if c == nil {
				c = foldCarrier{}
			}
			c[strings.ToLower(k)] = string(v)
		}
	}
	if c == nil {
		return trace.SpanContext{}
	}
	sc := trace.SpanContextFromContext(p.foreign.Extract(context.Background(), c))
	if !sc.IsValid() {
		return trace.SpanContext{}
	}
	return sc
}

// ContextOf is ContextOf(sc) with the foreign propagators' headers for it.
func (p *Propagation) ContextOf(sc trace.SpanContext) Context {
	c := ContextOf(sc)
	if c.Parent != nil && p != nil && p.foreign != nil {
		m := propagation.MapCarrier{}
		p.foreign.Inject(trace.ContextWithSpanContext(context.Background(), sc), m)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			c.Foreign = append(c.Foreign, Header{Key: k, Value: []byte(m[k])})
		}
		c.prop = p
	}
	return c
}

// foldCarrier is a carrier of header names in lower case that finds a
// name however a propagator spells it (xray asks for X-Amzn-Trace-Id).
type foldCarrier map[string]string

func (c foldCarrier) Get(key string) string { return c[strings.ToLower(key)] }
func (c foldCarrier) Set(key, value string) { c[strings.ToLower(key)] = value }
func (c foldCarrier) Keys() []string        { return slices.Collect(maps.Keys(c)) }
