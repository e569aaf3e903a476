package tracing

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWithoutEndpointOrDisabledNothingIsTraced(t *testing.T) {
	for _, env := range [][]string{
		nil,
		{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_SDK_DISABLED=true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_TRACES_EXPORTER=none"},
		{"OTEL_METRICS_EXPORTER=otlp"},
	} {
		p, err := New(context.Background(), env, "i")
		if err != nil || p.Enabled() || p.Tracer("x") != nil || p.TracerProvider() != nil {
			t.Fatalf("%v: enabled %v err %v", env, p.Enabled(), err)
		}
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBothProtocolsStartWithoutACollector(t *testing.T) {
	for _, proto := range []string{"grpc", "http/protobuf", ""} {
		env := []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL=" + proto}
		p, err := New(context.Background(), env, "i")
		if err != nil || !p.Enabled() {
			t.Fatalf("%s: %v", proto, err)
		}
		_, span := p.Tracer("t").Start(context.Background(), "s")
		span.End()
		c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		_ = p.Shutdown(c) // nothing listens: bounded by c, whatever it says
		cancel()
		if time.Since(start) > 2*time.Second {
			t.Fatalf("%s: shutdown took %s", proto, time.Since(start))
		}
	}
}

func TestBadValuesNameTheirVariable(t *testing.T) {
	const ep = "OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318"
	for _, c := range []struct{ env, name string }{
		{"OTEL_EXPORTER_OTLP_PROTOCOL=thrift", "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{"OTEL_TRACES_EXPORTER=zipkin", "OTEL_TRACES_EXPORTER"},
		{"OTEL_SDK_DISABLED=maybe", "OTEL_SDK_DISABLED"},
		{"OTEL_TRACES_SAMPLER=sometimes", "OTEL_TRACES_SAMPLER"},
		{"OTEL_TRACES_SAMPLER=parentbased_traceidratio\x00OTEL_TRACES_SAMPLER_ARG=2", "OTEL_TRACES_SAMPLER_ARG"},
		{"OTEL_BSP_MAX_QUEUE_SIZE=-1", "OTEL_BSP_MAX_QUEUE_SIZE"},
		{"OTEL_BSP_SCHEDULE_DELAY=soon", "OTEL_BSP_SCHEDULE_DELAY"},
		{"OTEL_EXPORTER_OTLP_HEADERS=novalue", "OTEL_EXPORTER_OTLP_HEADERS"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=c:4317", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
	} {
		_, err := New(context.Background(), append([]string{ep}, strings.Split(c.env, "\x00")...), "i")
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: err %v, want one naming %s", c.env, err, c.name)
		}
	}
}

func TestParentBasedRatioIsAccepted(t *testing.T) {
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.1"}
	p, err := New(context.Background(), env, "i")
	if err != nil || !p.Enabled() {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = p.Shutdown(c)
}

func TestContextRoundTrip(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc := Parent([]byte(tp), []byte("v=1"))
	if c := ContextOf(sc); string(c.Parent) != tp || string(c.State) != "v=1" {
		t.Fatalf("%+v", c)
	}
	if Parent(nil, nil).IsValid() {
		t.Fatal("no headers gave a valid context")
	}
}
