package telemetry

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// The hook's latency: every HTTP request relay sends it (one per record,
// or one per batch under RELAY_HOOK_BATCH), by what came of it.
const (
	MetricHookDuration = "relay.hook.request.duration"
	MetricHookInFlight = "relay.hook.requests.in_flight"
)

// hookMeters are the hook's instruments.
type hookMeters struct {
	duration metric.Float64Histogram
	inFlight atomic.Int64
}

// HookStarted implements hook.Observer: a request is in flight.
func (m *Metrics) HookStarted() { m.hook.inFlight.Add(1) }

// HookEnded implements hook.Observer: a request ended with outcome
// (ok, rejected, invalid, rate_limited, refused, unavailable, timeout,
// error, unexpected) after d.
func (m *Metrics) HookEnded(outcome string, d time.Duration) {
	m.hook.inFlight.Add(-1)
	m.hook.duration.Record(context.Background(), d.Seconds(), metric.WithAttributes(attribute.String("outcome", outcome)))
	m.processed(context.Background(), outcome, d)
}

func (m *Metrics) hookInstruments(meter metric.Meter) error {
	var err error
	if m.hook.duration, err = meter.Float64Histogram(MetricHookDuration, metric.WithUnit("s"), describe(MetricHookDuration)); err != nil {
		return err
	}
	_, err = meter.Int64ObservableGauge(MetricHookInFlight, describe(MetricHookInFlight),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(m.hook.inFlight.Load())
			return nil
		}))
	return err
}

// hookView buckets the hook's latency from a millisecond to its longest
// sensible timeout.
func hookView() sdkmetric.View {
	return sdkmetric.NewView(
		sdkmetric.Instrument{Name: MetricHookDuration},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
			Boundaries: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}},
	)
}
