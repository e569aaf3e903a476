package telemetry

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"relay/internal/tracing"
)

// otlpReader is the metric reader OTEL_METRICS_EXPORTER selects beside
// relay's own /metrics: otlp (the default when OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is set) or console; none, or
// prometheus (relay's /metrics is the Prometheus exporter), adds nothing;
// nil then. One exporter, not a list; another value is an error naming the
// variable, as is an OTLP protocol other than http/protobuf or grpc
// (OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL).
//
// console is OpenTelemetry's own selection (autoexport). relay builds the
// OTLP reader itself, from the same standard variables, because autoexport
// returns a reader with its exporter inside and relay counts the points of
// exports that fail (dropped) at the exporter. The exporter and the reader
// read the other OTEL_* variables themselves (headers, timeout, interval)
// from the process's environment.
func otlpReader(environ []string, dropped *atomic.Int64) (sdkmetric.Reader, error) {
	env := tracing.ParseEnv(environ)
	ex, err := env.Exporter(envMetricsExporter, "otlp", "console", "prometheus", "none")
	if err != nil {
		return nil, err
	}
	switch ex {
	case "none", "prometheus":
		return nil, nil
	case "console":
		r, err := autoexport.NewMetricReader(context.Background())
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", envMetricsExporter, ex, err)
		}
		return r, nil
	case "":
		if env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "" && env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] == "" {
			return nil, nil
		}
	}
	proto, err := env.Protocol("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")
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

const envMetricsExporter = "OTEL_METRICS_EXPORTER"
