package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/metric"
)

// MetricSpansDropped counts the spans relay made and did not export: a
// full export queue, or a collector that did not take them.
const MetricSpansDropped = "relay.tracing.spans.dropped"

// SetSpansDropped gives the dropped-spans counter its source (a running
// total); without it the counter stays at 0.
func (m *Metrics) SetSpansDropped(total func() int64) { m.spansDropped.Store(&total) }

func (m *Metrics) spansDroppedCounter(meter metric.Meter) error {
	_, err := meter.Int64ObservableCounter(MetricSpansDropped, describe(MetricSpansDropped),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			var n int64
			if src := m.spansDropped.Load(); src != nil {
				n = (*src)()
			}
			o.Observe(n)
			return nil
		}))
	return err
}
