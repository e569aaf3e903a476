package tracing

import (
	"errors"
	"strings"
	"testing"
)

// OTEL_PROPAGATORS: unset is W3C with baggage; a known list parses; an
// unknown name is an error naming the variable, which New refuses.
func TestPropagatorsFromTheEnvironment(t *testing.T) {
	if p, err := (Env{}).Propagation(); err != nil || p != W3C || p.Foreign("b3") {
		t.Fatalf("unset: %v %v", p, err)
	}
	p, err := Env{EnvPropagators: "tracecontext, B3multi ,jaeger"}.Propagation()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"X-B3-TraceId", "x-b3-spanid", "uber-trace-id"} {
		if !p.Foreign(h) {
			t.Errorf("%s is not one of the foreign propagators' headers", h)
		}
	}
	if p.Foreign("traceparent") || p.Foreign("baggage") {
		t.Error("W3C headers counted as foreign")
	}
	if p, err := (Env{EnvPropagators: "b3,none"}).Propagation(); err != nil || p.Foreign("b3") {
		t.Fatalf("none: %v %v", p, err)
	}
	_, err = Env{EnvPropagators: "tracecontext,zipkin"}.Propagation()
	if err == nil || !strings.Contains(err.Error(), EnvPropagators) || !strings.Contains(err.Error(), "zipkin") {
		t.Fatalf("unknown propagator: %v", err)
	}
	if _, err := New(t.Context(), []string{EnvPropagators + "=zipkin"}, ""); !errors.Is(err, ErrConfig) {
		t.Fatalf("New with an unknown propagator: %v", err)
	}
}

// relay config shows the OTEL settings: defaults, what is set, exporters
// derived from the endpoint, header values masked.
func TestSettingsShowSources(t *testing.T) {
	env := ParseEnv([]string{EnvEndpoint + "=http://collector:4318", EnvHeaders + "=authorization=Bearer s3cret,x-tenant=a", "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_LOGS_EXPORTER=none"})
	got := map[string][2]string{}
	for _, s := range env.Settings(func(s string) string { return s }) {
		got[s.Name] = [2]string{s.Value, s.Source}
	}
	want := map[string][2]string{
		EnvServiceName:            {"relay", "default"},
		EnvEndpoint:               {"http://collector:4318", "env"},
		EnvHeaders:                {"authorization=****,x-tenant=****", "env"},
		EnvTracesExporter:         {"otlp", "derived"},
		EnvPropagators:            {"tracecontext,baggage", "default"},
		"OTEL_BSP_SCHEDULE_DELAY": {"100", "env"},
		"OTEL_LOGS_EXPORTER":      {"none", "env"},
		EnvResourceAttrs:          {"", "unset"},
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
