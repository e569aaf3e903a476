package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Key ordering's parked records (see RELAY_KEY_PARK_MAX_RECORDS).
const (
	MetricKeyParked       = "relay.key.parked.records"
	MetricKeyParkedBytes  = "relay.key.parked.bytes"
	MetricKeyParkedBehind = "relay.key.parked.behind"
	MetricKeyParkRefused  = "relay.key.park.refused"
	MetricKeyParkLost     = "relay.key.park.lost"
)

// Parked is what key ordering holds parked: the records and their bytes
// in memory, how far each partition's commit stays behind its handled
// position because of them, and the followers copied into a tier instead
// (by reason, since start).
type Parked struct {
	Records, Bytes int64
	Behind         []Lag
	Refused        map[string]int64
	// Lost counts the parked records found gone from their source
	// partitions, since start.
	Lost int64
}

// ParkedSource gives the parked records. It must not block.
type ParkedSource func() Parked

// SetParked gives the parked gauges their source.
func (m *Metrics) SetParked(src ParkedSource) { m.parked.Store(&src) }

func (m *Metrics) parkedGauges(meter metric.Meter) error {
	records, err := meter.Int64ObservableGauge(MetricKeyParked, describe(MetricKeyParked))
	if err != nil {
		return err
	}
	bytes, err := meter.Int64ObservableGauge(MetricKeyParkedBytes, describe(MetricKeyParkedBytes))
	if err != nil {
		return err
	}
	behind, err := meter.Int64ObservableGauge(MetricKeyParkedBehind, describe(MetricKeyParkedBehind))
	if err != nil {
		return err
	}
	refused, err := meter.Int64ObservableCounter(MetricKeyParkRefused, describe(MetricKeyParkRefused))
	if err != nil {
		return err
	}
	lost, err := meter.Int64ObservableCounter(MetricKeyParkLost, describe(MetricKeyParkLost))
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		src := m.parked.Load()
		if src == nil {
			return nil
		}
		p := (*src)()
		o.ObserveInt64(records, p.Records)
		o.ObserveInt64(bytes, p.Bytes)
		for _, l := range p.Behind {
			o.ObserveInt64(behind, l.Records, metric.WithAttributes(attribute.String("topic", l.Topic), attribute.Int("partition", int(l.Partition))))
		}
		for why, n := range p.Refused {
			o.ObserveInt64(refused, n, metric.WithAttributes(attribute.String("reason", why)))
		}
		o.ObserveInt64(lost, p.Lost)
		return nil
	}, records, bytes, behind, refused, lost)
	return err
}
