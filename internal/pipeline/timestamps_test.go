package pipeline

import (
	"context"
	"testing"
	"time"

	"relay/internal/envelope"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// Regression: a tier hop kept the source record's timestamp, so the tier
// topic's retention counted from the source time and a backlog older than
// it could be deleted before relay read it back. A tier record takes the
// hop's time, on every hop; relay.source.timestamp keeps the source time,
// and what the record finally becomes (output, quarantine) keeps the
// source record's timestamp.
func TestTierHopTakesTheHopTime(t *testing.T) {
	now := t0
	unavailable := tiers.Failf(tiers.CauseRegistryUnavailable, "503")
	a := &scriptedAdmitter{errs: []error{unavailable, unavailable, unavailable}}
	m, _ := newMachine(a, &now)
	src := source(42)
	src.Timestamp = t0.Add(-72 * time.Hour) // older than any tier's retention
	out, f := one(t)(m.Handle(context.Background(), src))
	if out.Topic != "orders.retry.30s" || !out.Timestamp.Equal(t0) || !f.SourceTimestamp.Equal(src.Timestamp) {
		t.Fatalf("first hop: %s at %v, source time %v", out.Topic, out.Timestamp, f.SourceTimestamp)
	}
	// The second hop, read from the first tier.
	now = t0.Add(31 * time.Second)
	a.errs = []error{unavailable}
	out, f = one(t)(m.Handle(context.Background(), asRead(out, 0)))
	if out.Topic != "orders.retry.5m" || !out.Timestamp.Equal(now) || !f.SourceTimestamp.Equal(src.Timestamp) {
		t.Fatalf("second hop: %s at %v, source time %v", out.Topic, out.Timestamp, f.SourceTimestamp)
	}
	tierRec := asRead(out, 0)
	// Quarantined from the tier: the original timestamp.
	now = t0.Add(7 * time.Minute)
	a.errs = []error{unavailable}
	out, _ = one(t)(m.Handle(context.Background(), tierRec))
	if out.Topic != "orders.quarantine" || !out.Timestamp.Equal(src.Timestamp) {
		t.Fatalf("quarantine: %s at %v, want the source time %v", out.Topic, out.Timestamp, src.Timestamp)
	}
	// Processed from the tier: the original timestamp too.
	out, _ = one(t)(m.Handle(context.Background(), tierRec))
	if out.Topic != "orders.valid" || !out.Timestamp.Equal(src.Timestamp) {
		t.Fatalf("output: %s at %v, want the source time %v", out.Topic, out.Timestamp, src.Timestamp)
	}
}

// A follower's tier record takes the hop's time too, and its later
// output the source record's.
func TestKeyFollowerTakesTheHopTime(t *testing.T) {
	m, a, now := keyed(t, false)
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	if _, err := m.Handle(context.Background(), rec("orders", 0, 10, "A")); err != nil {
		t.Fatal(err)
	}
	*now = t0.Add(time.Second)
	a2 := rec("orders", 0, 11, "A")
	a2.Timestamp = t0.Add(-72 * time.Hour)
	outs, err := m.Handle(context.Background(), a2)
	if err != nil || len(outs) != 2 || !outs[0].Timestamp.Equal(*now) {
		t.Fatalf("follower: %v at %v, want %v", topics(outs), outs[0].Timestamp, *now)
	}
	if f, _ := envelope.Parse(outs[0].Headers); !f.SourceTimestamp.Equal(a2.Timestamp) {
		t.Fatalf("follower's source time %v", f.SourceTimestamp)
	}
}

// A replayed record that goes through a tier keeps the replay's time for
// its output (the replay topic's rule), not the tier hop's nor the
// source's.
func TestReplayThroughTierKeepsTheReplayTime(t *testing.T) {
	m, a, now, _ := ledgered(t)
	q := quarantineOne(t, m, a)
	replay := replayRecord(q, 0, 1)
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503"), tiers.Failf(tiers.CauseRegistryUnavailable, "503"),
		tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	out, _ := one(t)(m.Handle(context.Background(), replay))
	if out.Topic != "orders.retry.30s" || !out.Timestamp.Equal(*now) {
		t.Fatalf("replay's hop: %s at %v", out.Topic, out.Timestamp)
	}
	*now = t0.Add(2 * time.Hour)
	outs, err := m.Handle(context.Background(), asRead(out, 0))
	if err != nil || len(outs) == 0 || outs[0].Topic != "orders.valid" || !outs[0].Timestamp.Equal(replay.Timestamp) {
		t.Fatalf("replay output: %v at %v, want the replay's time %v (%v)", topics(outs), outs[0].Timestamp, replay.Timestamp, err)
	}
}

// A tier record written before tier hops took their own time carries the
// source time as its timestamp and no relay.record.timestamp: it is read
// as it was written.
func TestOldTierRecordKeepsItsTimestamp(t *testing.T) {
	now := t0
	m, _ := newMachine(&scriptedAdmitter{}, &now)
	f := &envelope.Failure{ID: "orders/3/1", SourceTopic: "orders", SourcePartition: 3, SourceOffset: 1, Attempt: 3,
		FirstFailedAt: t0.Add(-time.Minute), LastFailedAt: t0.Add(-time.Minute), NotBefore: t0, Class: "transient", Code: "X"}
	old := &txn.Record{Topic: "orders.retry.30s", Partition: 3, Offset: 0, Key: []byte("k"), Value: []byte("v"),
		Headers: envelope.AppendFailure([]txn.Header(nil), f), Timestamp: t0.Add(-time.Hour)}
	out, _ := one(t)(m.Handle(context.Background(), old))
	if out.Topic != "orders.valid" || !out.Timestamp.Equal(old.Timestamp) {
		t.Fatalf("%s at %v, want %v", out.Topic, out.Timestamp, old.Timestamp)
	}
}
