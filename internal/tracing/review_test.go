package tracing

import (
	"testing"
)

// OTEL_PROPAGATORS=xray: a source record with no traceparent and an
// X-Amzn-Trace-Id header is a child of the trace that header names. The
// xray propagator asks its carrier for "X-Amzn-Trace-Id" as it spells it.
func TestXRayContextIsRead(t *testing.T) {
	p, err := Env{EnvPropagators: "tracecontext,xray"}.Propagation()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"X-Amzn-Trace-Id", "x-amzn-trace-id"} {
		hs := func(yield func(string, []byte) bool) {
			yield(key, []byte("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"))
		}
		sc := p.Extract(hs)
		if !sc.IsValid() || sc.TraceID().String() != "5759e988bd862e3fe1be46a994272793" {
			t.Errorf("%s: extracted %v, want trace 5759e988bd862e3fe1be46a994272793", key, sc)
		}
	}
}
