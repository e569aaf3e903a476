package tracing

import (
	"strings"
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

// relay config masks credentials in the OTLP endpoints as it does in
// relay's own URLs, and never shows a header entry it cannot split.
func TestSettingsMaskEndpointsAndMalformedHeaders(t *testing.T) {
	env := Env{
		EnvEndpoint:                           "https://user:s3cret@collector.example:4318/?api_key=k3y",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":  "https://u:tr4ces@collector.example/v1/traces",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "https://collector.example/v1/metrics?token=m3trics",
		EnvHeaders:                            "Authorization=Bearer t0ken,Bearer l00se",
	}
	for _, s := range env.Settings() {
		for _, secret := range []string{"s3cret", "k3y", "tr4ces", "m3trics", "t0ken", "l00se"} {
			if strings.Contains(s.Value, secret) {
				t.Errorf("%s=%s shows %s", s.Name, s.Value, secret)
			}
		}
	}
}
