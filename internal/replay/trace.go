package replay

import (
	"context"
	"fmt"
	"strconv"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"relay/internal/envelope"
	"relay/internal/quarantine"
	"relay/internal/tracing"
)

// traceReplay starts the send span of fl's replay record msg: the root
// of a new trace, linked to the quarantined record's trace (its
// traceparent), and puts the span's trace context into msg in place of
// the one the quarantined record carried, so the replayed record's
// process span is its child. nil without tracing.
func (r *run) traceReplay(fl *quarantine.Failure, msg *kafka.Message) trace.Span {
	if r.tracer == nil {
		return nil
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindProducer)}
	from := tracing.Parent(headerOf(fl.Record.Headers, envelope.TraceParent), headerOf(fl.Record.Headers, envelope.TraceState))
	if from.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: from,
			Attributes: []attribute.KeyValue{attribute.String("relay.link", "quarantined record")}}))
	}
	topic := *msg.TopicPartition.Topic
	_, span := r.tracer.Start(context.Background(), "send "+topic, opts...)
	span.SetAttributes(semconv.MessagingSystemKafka, semconv.MessagingOperationTypeSend,
		semconv.MessagingOperationName("send"), semconv.MessagingDestinationName(topic),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(int(msg.TopicPartition.Partition))),
		attribute.String("relay.failure.id", fl.ID), attribute.String("relay.replay.id", r.id))
	tc := tracing.ContextOf(span.SpanContext())
	hs := msg.Headers[:0]
	for _, h := range msg.Headers {
		if h.Key != envelope.TraceParent && h.Key != envelope.TraceState {
			hs = append(hs, h)
		}
	}
	hs = append(hs, kafka.Header{Key: envelope.TraceParent, Value: tc.Parent})
	if tc.State != nil {
		hs = append(hs, kafka.Header{Key: envelope.TraceState, Value: tc.State})
	}
	msg.Headers = hs
	return span
}

func headerOf(hs []kafka.Header, key string) []byte {
	for _, h := range hs {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

// endSpans ends the send spans of a transaction that ended with err.
func endSpans(spans []trace.Span, err error) {
	for _, s := range spans {
		if err != nil {
			tracing.Fail(s, fmt.Sprintf("%T", err), "the replay's transaction failed")
		}
		s.End()
	}
}
