package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The watchdog's metrics (see txn's watchdog.go): librdkafka calls that
// did not return within their bound.
const (
	// MetricWedges counts wedged librdkafka calls, by call.
	MetricWedges = "relay.kafka.calls.wedged"
	// MetricWedgedOpen is how many abandoned producers are still open:
	// their wedged call has not returned yet.
	MetricWedgedOpen = "relay.kafka.producers.abandoned"
)

// Wedged implements txn.Observer.
func (m *Metrics) Wedged(call string) {
	m.wedges.Add(context.Background(), 1, metric.WithAttributes(attribute.String("call", call)))
}

// Abandoned implements txn.Observer; it may come from any goroutine.
func (m *Metrics) Abandoned(delta int) { m.wedgedOpen.Add(int64(delta)) }

func (m *Metrics) wedgeInstruments(meter metric.Meter) error {
	var err error
	if m.wedges, err = meter.Int64Counter(MetricWedges, describe(MetricWedges)); err != nil {
		return err
	}
	_, err = meter.Int64ObservableGauge(MetricWedgedOpen, describe(MetricWedgedOpen),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(m.wedgedOpen.Load())
			return nil
		}))
	return err
}
