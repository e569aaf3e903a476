package quarantine

import (
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/ledger"
)

// show prints the quarantined record's trace id and, with RELAY_TRACE_URL,
// the link to it.
func TestShowLinksTheTrace(t *testing.T) {
	fl := &Failure{ID: "o/0/1", State: ledger.Open, Record: &Record{Failure: &envelope.Failure{ID: "o/0/1"}, Topic: "o.quarantine", Kept: true,
		Headers: []kafka.Header{{Key: envelope.TraceParent, Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}}}
	out := ShowFailure(fl, "https://jaeger.example/trace/{traceId}")
	if out.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || out.TraceURL != "https://jaeger.example/trace/4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("trace %q link %q", out.TraceID, out.TraceURL)
	}
	if out := ShowFailure(fl, ""); out.TraceURL != "" {
		t.Fatalf("link %q without RELAY_TRACE_URL", out.TraceURL)
	}
}
