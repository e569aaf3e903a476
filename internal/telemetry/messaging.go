package telemetry

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
)

// The OpenTelemetry semantic conventions' messaging metrics, beside
// relay's own, so that a dashboard made for any Kafka client shows relay:
//
//   - messaging.client.consumed.messages: source records delivered to
//     relay (relay.records.consumed, by another name);
//   - messaging.client.sent.messages: records relay wrote in committed
//     transactions (relay.outputs.committed);
//   - messaging.process.duration: the hook's processing of a record (of a
//     batch under RELAY_HOOK_BATCH), with error.type when it failed.
//
// Each has messaging.system kafka, its messaging.operation.name (poll,
// send, process), and messaging.consumer.group.name where it applies.
type messagingMeters struct {
	group   atomic.Pointer[string]
	sent    messagingconv.ClientSentMessages
	process messagingconv.ProcessDuration
}

// SetConsumerGroup names relay's consumer group in the messaging metrics.
func (m *Metrics) SetConsumerGroup(group string) { m.messaging.group.Store(&group) }

func (m *Metrics) groupAttrs() []attribute.KeyValue {
	if g := m.messaging.group.Load(); g != nil && *g != "" {
		return []attribute.KeyValue{semconv.MessagingConsumerGroupName(*g)}
	}
	return nil
}

func (m *Metrics) messagingInstruments(meter metric.Meter) error {
	var err error
	if m.messaging.sent, err = messagingconv.NewClientSentMessages(meter); err != nil {
		return err
	}
	if m.messaging.process, err = messagingconv.NewProcessDuration(meter); err != nil {
		return err
	}
	// Consumed counts in an atomic number the loop adds to (Consumed):
	// observed, under the convention's name, unit and description.
	var consumed messagingconv.ClientConsumedMessages
	_, err = meter.Int64ObservableCounter(consumed.Name(), metric.WithUnit(consumed.Unit()), metric.WithDescription(consumed.Description()),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			attrs := append([]attribute.KeyValue{semconv.MessagingSystemKafka, semconv.MessagingOperationName("poll")}, m.groupAttrs()...)
			o.Observe(m.consumed.Load(), metric.WithAttributes(attrs...))
			return nil
		}))
	return err
}

// sentMessages counts outputs written in a committed transaction.
func (m *Metrics) sentMessages(ctx context.Context, n int) {
	m.messaging.sent.Add(ctx, int64(n), "send", messagingconv.SystemKafka)
}

// processed records a hook call's duration; outcome other than ok is its
// error.type.
func (m *Metrics) processed(ctx context.Context, outcome string, d time.Duration) {
	attrs := m.groupAttrs()
	if outcome != "ok" {
		attrs = append(attrs, m.messaging.process.AttrErrorType(messagingconv.ErrorTypeAttr(outcome)))
	}
	m.messaging.process.Record(ctx, d.Seconds(), "process", messagingconv.SystemKafka, attrs...)
}

// processView gives messaging.process.duration the hook's buckets (the
// SDK's defaults are for milliseconds).
func processView() sdkmetric.View {
	return sdkmetric.NewView(
		sdkmetric.Instrument{Name: messagingconv.ProcessDuration{}.Name()},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
			Boundaries: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}},
	)
}
