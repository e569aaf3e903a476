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

// MetricGroupFeatures is, per feature, whether every member of the
// group announces it (see package features).
const MetricGroupFeatures = "relay.group.features"

// FeaturesSource says, per feature, whether it is in force. It must not
// block.
type FeaturesSource func() map[string]bool

// SetFeatures gives the features gauge its source.
func (m *Metrics) SetFeatures(src FeaturesSource) { m.features.Store(&src) }

func (m *Metrics) featuresGauge(meter metric.Meter) error {
	_, err := meter.Int64ObservableGauge(MetricGroupFeatures, describe(MetricGroupFeatures),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			src := m.features.Load()
			if src == nil {
				return nil
			}
			for f, on := range (*src)() {
				v := int64(0)
				if on {
					v = 1
				}
				o.Observe(v, metric.WithAttributes(attribute.String("feature", f)))
			}
			return nil
		}))
	return err
}
