package telemetry

import (
	"context"
	"regexp"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The telemetry relay made and could not deliver.
const (
	// MetricSpansDropped counts the spans relay made and did not export:
	// a full export queue, or a collector that did not take them.
	MetricSpansDropped = "relay.tracing.spans.dropped"
	// MetricPointsDropped counts the metric data points of OTLP exports
	// that failed (the collector did not take them). /metrics is pulled,
	// and drops nothing.
	MetricPointsDropped = "relay.metrics.points.dropped"
)

// SetSpansDropped gives the dropped-spans counter its source (a running
// total); without it the counter stays at 0.
func (m *Metrics) SetSpansDropped(total func() int64) { m.spansDropped.Store(&total) }

// PointsDropped is how many metric data points OTLP exports failed to
// deliver.
func (m *Metrics) PointsDropped() int64 { return m.pointsDropped.Load() }

func (m *Metrics) droppedCounters(meter metric.Meter) error {
	_, err := meter.Int64ObservableCounter(MetricSpansDropped, describe(MetricSpansDropped),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			var n int64
			if src := m.spansDropped.Load(); src != nil {
				n = (*src)()
			}
			o.Observe(n)
			return nil
		}))
	if err != nil {
		return err
	}
	_, err = meter.Int64ObservableCounter(MetricPointsDropped, describe(MetricPointsDropped),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(m.pointsDropped.Load())
			return nil
		}))
	return err
}

// countingExporter counts the data points of the exports that fail. With
// the default cumulative temporality the next export that succeeds
// carries their totals on, and what is lost is the collector's view of
// the interval; with delta temporality the counts themselves are lost.
type countingExporter struct {
	sdkmetric.Exporter
	dropped *atomic.Int64
}

func (e countingExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := e.Exporter.Export(ctx, rm)
	if err != nil {
		e.dropped.Add(droppedBy(err, rm))
	}
	return err
}

// partialSuccess is how the OTLP metric exporters word a partial success:
// the collector took the export but rejected some of its points (often
// none: a warning only). The SDK does not export the error's type.
var partialSuccess = regexp.MustCompile(`OTLP partial success: .*\((\d+) metric data points rejected\)`)

// droppedBy is how many of rm's points the failed export err lost: the
// rejected ones of a partial success, else all of them.
func droppedBy(err error, rm *metricdata.ResourceMetrics) int64 {
	if m := partialSuccess.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	return int64(points(rm))
}

// points is how many data points rm holds.
func points(rm *metricdata.ResourceMetrics) int {
	n := 0
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			n += pointsOf(mt.Data)
		}
	}
	return n
}

func pointsOf(data metricdata.Aggregation) int {
	switch d := data.(type) {
	case metricdata.Sum[int64]:
		return len(d.DataPoints)
	case metricdata.Sum[float64]:
		return len(d.DataPoints)
	case metricdata.Gauge[int64]:
		return len(d.DataPoints)
	case metricdata.Gauge[float64]:
		return len(d.DataPoints)
	case metricdata.Histogram[int64]:
		return len(d.DataPoints)
	case metricdata.Histogram[float64]:
		return len(d.DataPoints)
	case metricdata.ExponentialHistogram[int64]:
		return len(d.DataPoints)
	case metricdata.ExponentialHistogram[float64]:
		return len(d.DataPoints)
	case metricdata.Summary:
		return len(d.DataPoints)
	}
	return 0
}
