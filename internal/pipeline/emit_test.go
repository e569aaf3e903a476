package pipeline

import (
	"errors"
	"testing"
	"time"

	"relay/internal/envelope"
	"relay/internal/schema"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// A terminal record keeps the record's own timestamp; a tier record is
// stamped with the hop's time and carries the record's own in its
// envelope.
func TestTerminalAndTierRecords(t *testing.T) {
	rec := source(5)
	rec.Headers = append(rec.Headers, txn.Header{Key: envelope.ErrorCode, Value: []byte("STALE")})
	f := &envelope.Failure{ID: "orders/3/5", SourceTopic: "orders", Attempt: 1, Code: "X"}
	end := terminalRecord(&pass{rec: rec}, "orders.quarantine", f, []envelope.Header{{Key: "kafka_dlt-exception-fqcn", Value: []byte("relay.X")}})
	if !end.Timestamp.Equal(rec.Timestamp) || end.Topic != "orders.quarantine" || string(end.Value) != "raw" {
		t.Fatalf("terminal record %+v", end)
	}
	if v, _ := envelope.Lookup(end.Headers, envelope.ErrorCode); string(v) != "X" {
		t.Fatalf("error code %q: relay's old headers must be replaced", v)
	}
	if _, ok := envelope.Lookup(end.Headers, "kafka_dlt-exception-fqcn"); !ok {
		t.Fatal("compatibility headers must be added")
	}
	hop := t0.Add(time.Hour)
	tier := tierRecord(&pass{rec: rec}, "orders.retry.30s", &envelope.Failure{ID: "orders/3/5", Attempt: 2}, nil, hop)
	back, err := envelope.Parse(tier.Headers)
	if err != nil || !tier.Timestamp.Equal(hop) || !back.RecordTimestamp.Equal(rec.Timestamp) {
		t.Fatalf("tier record at %v, envelope %+v, %v", tier.Timestamp, back, err)
	}
}

// failureOf fills the envelope from the pass and the verdict: attempts and
// first failure from the pass, class, code and the redacted cause from the
// verdict, the schema as far as known.
func TestFailureOf(t *testing.T) {
	now := t0
	m, _ := newMachine(nil, &now)
	p := &pass{rec: source(9), origin: Origin{Routes: &Routes{Source: "orders"}, Tier: -1}, id: "orders/3/9",
		st: tiers.State{Attempt: 3, FirstFailedAt: t0.Add(-time.Minute)}}
	v := verdict{Decision: tiers.Decision{Kind: tiers.Quarantine, Class: tiers.Transient, Code: "C"},
		cause: errors.New("GET https://user:secret@registry/ failed\nat line 2"), info: schema.Info{ID: 4, Subject: "s", Version: 2}}
	f := m.failureOf(p, v, now)
	if f.Attempt != 3 || !f.FirstFailedAt.Equal(t0.Add(-time.Minute)) || !f.LastFailedAt.Equal(now) || f.Code != "C" ||
		f.Class != "transient" || f.SchemaID != 4 || f.SchemaVersion != 2 || f.ConsumerGroup != "relay" {
		t.Fatalf("envelope %+v", f)
	}
	if f.Message == "" || containsAny(f.Message, "secret", "\n") {
		t.Fatalf("message %q must be redacted and on one line", f.Message)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		for i := 0; i+len(sub) <= len(s); i++ {
			if s[i:i+len(sub)] == sub {
				return true
			}
		}
	}
	return false
}
