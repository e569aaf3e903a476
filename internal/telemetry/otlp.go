package telemetry

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"relay/internal/tracing"
)

// otlpReader is a periodic OTLP/HTTP (protobuf) metric reader when the
// standard variables ask for one: OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT set, and OTEL_METRICS_EXPORTER not
// "none" (nor "prometheus" alone). The exporter and the reader read the
// other OTEL_* variables themselves (headers, timeout, interval); the
// points of exports that fail are counted in dropped. nil
// when none is asked for. The protocol is http/protobuf or grpc
// (OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL);
// another is an error naming the variable.
func otlpReader(environ []string, dropped *atomic.Int64) (sdkmetric.Reader, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "OTEL_") {
			env[k] = v
		}
	}
	if env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "" && env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] == "" {
		return nil, nil
	}
	if ex := env["OTEL_METRICS_EXPORTER"]; ex != "" && !strings.Contains(ex, "otlp") {
		return nil, nil
	}
	proto, err := tracing.ParseEnv(environ).Protocol("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")
	if err != nil {
		return nil, err
	}
	var exp sdkmetric.Exporter
	if proto == tracing.ProtocolGRPC {
		exp, err = otlpmetricgrpc.New(context.Background()) // connects lazily
	} else {
		exp, err = otlpmetrichttp.New(context.Background())
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP metric exporter: %w", err)
	}
	return sdkmetric.NewPeriodicReader(countingExporter{exp, dropped}), nil
}
