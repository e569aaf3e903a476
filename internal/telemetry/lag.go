package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// MetricConsumerLag is the records of an assigned partition not consumed
// yet: its end (the high watermark last fetched) minus relay's position.
// A tier partition's lag is its retry backlog.
const MetricConsumerLag = "relay.consumer.lag"

// Lag is one assigned partition's lag.
type Lag struct {
	Topic     string
	Partition int32
	Records   int64
}

// LagSource lists the lag of every partition the instance owns. It must
// not block: it reads what the consumer already knows.
type LagSource func() []Lag

// SetLag gives the lag gauge its source.
func (m *Metrics) SetLag(src LagSource) { m.lag.Store(&src) }

// lagGauge registers the lag gauge; it observes nothing until SetLag.
func (m *Metrics) lagGauge(meter metric.Meter) error {
	_, err := meter.Int64ObservableGauge(MetricConsumerLag, describe(MetricConsumerLag),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			src := m.lag.Load()
			if src == nil {
				return nil
			}
			for _, l := range (*src)() {
				o.Observe(l.Records, metric.WithAttributes(attribute.String("topic", l.Topic), attribute.Int("partition", int(l.Partition))))
			}
			return nil
		}))
	return err
}
