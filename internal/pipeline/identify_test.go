package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	"relay/internal/envelope"
	"relay/internal/txn"
)

// A tier record whose envelope cannot be read is quarantined at once with
// ENVELOPE_INVALID; one that is not due yet is not handled.
func TestIdentifyTierRecords(t *testing.T) {
	now := t0
	m, _ := newMachine(&scriptedAdmitter{}, &now)
	bad := &txn.Record{Topic: "orders.retry.30s", Partition: 3, Offset: 1, Value: []byte("v"),
		Headers: []txn.Header{{Key: envelope.FailureID, Value: []byte("orders/3/1")}, {Key: envelope.Attempt, Value: []byte("x")}}}
	out, f := one(t)(m.Handle(context.Background(), bad))
	if out.Topic != "orders.quarantine" || f.Code != CodeEnvelopeInvalid {
		t.Fatalf("%s %+v", out.Topic, f)
	}
	early := &envelope.Failure{ID: "orders/3/2", SourceTopic: "orders", SourcePartition: 3, SourceOffset: 2, Attempt: 1,
		FirstFailedAt: t0, LastFailedAt: t0, NotBefore: t0.Add(time.Minute), Class: "transient", Code: "X"}
	rec := &txn.Record{Topic: "orders.retry.30s", Partition: 3, Offset: 2, Headers: envelope.AppendFailure([]txn.Header(nil), early)}
	_, err := m.Handle(context.Background(), rec)
	var nd *txn.NotDueError
	if !errors.As(err, &nd) || !nd.Until.Equal(t0.Add(time.Minute)) {
		t.Fatalf("err %v, want not due until %v", err, t0.Add(time.Minute))
	}
}

// A replay record keeps its failure's identity; one without a replay id
// was not published by relay replay and is quarantined.
func TestIdentifyReplayRecords(t *testing.T) {
	p := &pass{rec: &txn.Record{Headers: envelope.AppendFailure([]txn.Header(nil), &envelope.Failure{ID: "orders/1/2", SourceOffset: 2,
		ReplayID: "rp", ReplayCount: 1})}}
	if err := fromReplay(p); err != nil || p.id != "orders/1/2" || p.srcOffset != 2 || p.prev.ReplayID != "rp" {
		t.Fatalf("pass %+v, %v", p, err)
	}
	p = &pass{rec: &txn.Record{Headers: envelope.AppendFailure([]txn.Header(nil), &envelope.Failure{ID: "orders/1/2"})}}
	if err := fromReplay(p); err == nil {
		t.Fatal("a replay record without a replay id must not be read")
	}
}

// A record of an unknown topic is an error, not a guess.
func TestIdentifyUnknownTopic(t *testing.T) {
	now := t0
	m, _ := newMachine(nil, &now)
	if _, err := m.Handle(context.Background(), &txn.Record{Topic: "elsewhere"}); err == nil {
		t.Fatal("a record of a topic relay does not route must be an error")
	}
}
