package replay

import (
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"relay/internal/envelope"
	"relay/internal/quarantine"
	"relay/internal/tracing"
)

// A replay record starts a trace whose send span links to the
// quarantined record's trace, and carries the send span's context.
func TestReplayRecordLinksTheQuarantinedTrace(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	r := &run{id: "rp-1", tracer: tracing.NewWith(spans).Tracer("test")}
	old := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	fl := &quarantine.Failure{ID: "o/0/1", Record: &quarantine.Record{Headers: []kafka.Header{{Key: envelope.TraceParent, Value: []byte(old)}}}}
	topic := "o.replay"
	msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic}, Headers: []kafka.Header{{Key: "app", Value: []byte("a")},
		{Key: envelope.TraceParent, Value: []byte(old)}}}
	endSpans([]oteltrace.Span{r.traceReplay(fl, msg)}, nil)
	s := spans.Ended()[0]
	if s.Parent().IsValid() || s.Name() != "send o.replay" {
		t.Fatalf("span %q parent %v", s.Name(), s.Parent())
	}
	if l := s.Links(); len(l) != 1 || l[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("links %+v", l)
	}
	got := string(headerOf(msg.Headers, envelope.TraceParent))
	if got == old || envelope.TraceID(got) != s.SpanContext().TraceID().String() || len(msg.Headers) != 2 {
		t.Fatalf("replay record's traceparent %q, headers %v", got, msg.Headers)
	}
}
