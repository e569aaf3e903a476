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
	s := &Snapshot{ByID: map[string]*Failure{fl.ID: fl}, traceURL: "https://jaeger.example/trace/{traceId}"}
	out, ok := s.Show(fl.ID)
	if !ok || out.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || out.TraceURL != "https://jaeger.example/trace/4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("trace %q link %q", out.TraceID, out.TraceURL)
	}
	s.traceURL = ""
	if out, _ := s.Show(fl.ID); out.TraceURL != "" {
		t.Fatalf("link %q without RELAY_TRACE_URL", out.TraceURL)
	}
}
