package pipeline

import (
	"context"
	"strconv"
	"testing"
	"time"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// ledgered is a machine that keeps the ledger and reads a replay topic.
func ledgered(t *testing.T) (*Machine, *scriptedAdmitter, *time.Time, countOutcomes) {
	t.Helper()
	now := t0
	a := &scriptedAdmitter{}
	m, outs := newMachine(a, &now)
	m.table = NewTable([]Routes{{Source: "orders", Output: "orders.valid", Quarantine: "orders.quarantine", Rejected: "orders.rejected",
		Replay: "orders.replay", Tiers: []string{"orders.retry.30s", "orders.retry.5m"}}})
	m.stateTopic, m.actor, m.settled = "_relay.relay.state", "relay/test", &ledger.Settled{}
	return m, a, &now, outs
}

// replayRecord is what relay replay publishes for a quarantined record.
func replayRecord(q txn.Output, offset int64, count int) *txn.Record {
	hs := append([]txn.Header{}, q.Headers...)
	hs = append(hs, txn.Header{Key: envelope.ReplayID, Value: []byte("rp-1")},
		txn.Header{Key: envelope.ReplayCount, Value: []byte(strconv.Itoa(count))})
	return &txn.Record{Topic: "orders.replay", Partition: q.Partition, Offset: offset, Key: q.Key, Value: q.Value, Headers: hs, Timestamp: t0.Add(time.Hour)}
}

func ledgerEvent(t *testing.T, o txn.Output) *ledger.Event {
	t.Helper()
	e, ok, err := ledger.Decode(string(o.Key), o.Value)
	if !ok || err != nil {
		t.Fatalf("not a ledger record: %s %v", o.Key, err)
	}
	return e
}

// quarantine one source record and return its quarantine record.
func quarantineOne(t *testing.T, m *Machine, a *scriptedAdmitter) txn.Output {
	t.Helper()
	a.errs = []error{tiers.Failf(tiers.CauseWireFormat, "magic byte 0x7b")}
	outs, err := m.Handle(context.Background(), source(9))
	if err != nil || len(outs) != 2 || outs[0].Topic != "orders.quarantine" || outs[1].Topic != "_relay.relay.state" {
		t.Fatalf("quarantine: %v %v", topics(outs), err)
	}
	e := ledgerEvent(t, outs[1])
	if e.State != ledger.Open || e.ID != "orders/3/9" || outs[1].Partition != 3 || e.Topic != "orders.quarantine" ||
		!e.RecordTime.Equal(outs[0].Timestamp) || e.Code != tiers.CodeWireFormatInvalid || e.Actor != "relay/test" {
		t.Fatalf("open event %+v in partition %d", e, outs[1].Partition)
	}
	m.OnCommit()
	return outs[0]
}

func TestReplayResolvesWithOriginalIdentity(t *testing.T) {
	m, a, _, counted := ledgered(t)
	q := quarantineOne(t, m, a)
	outs, err := m.Handle(context.Background(), replayRecord(q, 0, 1))
	if err != nil || len(outs) != 2 || outs[0].Topic != "orders.valid" {
		t.Fatalf("replay: %v %v", topics(outs), err)
	}
	hs := outs[0].Headers
	if id, _ := envelope.Lookup(hs, envelope.MessageID); string(id) != "orders/3/9" {
		t.Fatalf("output identity %q, want the original", id)
	}
	if c, _ := envelope.Lookup(hs, envelope.ReplayCount); string(c) != "1" {
		t.Fatal("output must say it is a replay")
	}
	if _, ok := envelope.Lookup(hs, envelope.ErrorCode); ok {
		t.Fatal("the quarantine envelope must not reach the output")
	}
	e := ledgerEvent(t, outs[1])
	if e.State != ledger.Resolved || e.Outcome != ledger.OutcomeProcessed || e.ReplayID != "rp-1" || e.ReplayCount != 1 || outs[1].Partition != 3 {
		t.Fatalf("resolved event %+v", e)
	}
	m.OnCommit()
	if counted["replay/resolved"] != 1 {
		t.Fatalf("replay outcomes %v", counted)
	}
	// The same replay record again (a second replay, a copy): not output.
	outs, _ = m.Handle(context.Background(), replayRecord(q, 1, 1))
	if len(outs) != 1 || outs[0].Topic != "_relay.relay.state" {
		t.Fatalf("a copy was output again: %v", topics(outs))
	}
	if e := ledgerEvent(t, outs[0]); e.Outcome != ledger.OutcomeDuplicate || e.State != ledger.Resolved {
		t.Fatalf("duplicate event %+v", e)
	}
	m.OnCommit()
	if counted["replay/duplicate"] != 1 {
		t.Fatalf("a skipped copy must be counted: %v", counted)
	}
}

func TestReplayFailsAgainAndAbortForgets(t *testing.T) {
	m, a, now, _ := ledgered(t)
	q := quarantineOne(t, m, a)
	*now = t0.Add(2 * time.Hour)
	a.errs = []error{tiers.Failf(tiers.CausePayloadMalformed, "truncated")}
	outs, _ := m.Handle(context.Background(), replayRecord(q, 0, 1))
	if len(outs) != 2 || outs[0].Topic != "orders.quarantine" {
		t.Fatalf("failed again: %v", topics(outs))
	}
	f, _ := envelope.Parse(outs[0].Headers)
	e := ledgerEvent(t, outs[1])
	if f.ReplayCount != 1 || f.ReplayID != "rp-1" || f.Attempt != 1 || !f.FirstFailedAt.Equal(*now) {
		t.Fatalf("a replay is a new pass with its replay metadata: %+v", f)
	}
	if e.State != ledger.FailedAgain || e.Code != tiers.CodePayloadMalformed || e.Topic != "orders.quarantine" || !e.RecordTime.Equal(outs[0].Timestamp) {
		t.Fatalf("failed-again event %+v", e)
	}
	// The transaction aborts: the record comes again and is handled
	// again, not taken for a copy.
	m.OnAbort()
	a.errs = nil
	outs, _ = m.Handle(context.Background(), replayRecord(q, 0, 1))
	if len(outs) != 2 || outs[0].Topic != "orders.valid" {
		t.Fatalf("after an abort: %v", topics(outs))
	}
}

func TestReplayThroughATierKeepsItsReplay(t *testing.T) {
	m, a, now, _ := ledgered(t)
	m.policy.BlockingAttempts = 0
	q := quarantineOne(t, m, a)
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	outs, _ := m.Handle(context.Background(), replayRecord(q, 0, 1))
	if len(outs) != 1 || outs[0].Topic != "orders.retry.30s" {
		t.Fatalf("transient on replay: %v (no ledger change while it waits)", topics(outs))
	}
	*now = t0.Add(time.Minute)
	outs, _ = m.Handle(context.Background(), asRead(outs[0], 0))
	if len(outs) != 2 || outs[0].Topic != "orders.valid" || ledgerEvent(t, outs[1]).State != ledger.Resolved {
		t.Fatalf("from the tier: %v", topics(outs))
	}
}

func TestReplayRecordWithoutReplayHeadersIsQuarantined(t *testing.T) {
	m, a, _, _ := ledgered(t)
	q := quarantineOne(t, m, a)
	r := replayRecord(q, 5, 1)
	r.Headers = envelope.Strip(r.Headers) // written by someone else
	outs, _ := m.Handle(context.Background(), r)
	f, _ := envelope.Parse(outs[0].Headers)
	if outs[0].Topic != "orders.quarantine" || f.Code != CodeEnvelopeInvalid || f.ID != "orders.replay/3/5" {
		t.Fatalf("%v %+v", topics(outs), f)
	}
}

// A copy of a replayed record that waited behind its key is recognised at
// its turn, and lets the key go on: the key is not blocked for ever.
func TestDuplicateAtItsKeysTurnReleasesTheKey(t *testing.T) {
	m, a, now, _ := ledgered(t)
	m.policy.BlockingAttempts = 0
	m.keys, m.keyOrder = &KeyOrdering{StateTopic: m.stateTopic}, true
	ctx := context.Background()
	q := quarantineOne(t, m, a)
	if outs, _ := m.Handle(ctx, replayRecord(q, 0, 1)); len(outs) != 2 || outs[0].Topic != "orders.valid" {
		t.Fatalf("replay: %v", topics(outs))
	}
	m.OnCommit()
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	head, _ := m.Handle(ctx, source(20))
	m.OnCommit()
	follower, _ := m.Handle(ctx, replayRecord(q, 1, 1))
	if len(follower) != 2 || follower[0].Topic != "orders.retry.30s" {
		t.Fatalf("the copy must wait behind the blocked key: %v", topics(follower))
	}
	m.OnCommit()
	*now = t0.Add(time.Minute)
	if outs, _ := m.Handle(ctx, asRead(head[0], 0)); outs[0].Topic != "orders.valid" {
		t.Fatalf("head: %v", topics(outs))
	}
	m.OnCommit()
	outs, _ := m.Handle(ctx, asRead(follower[0], 1))
	for _, o := range outs {
		if o.Topic != m.stateTopic {
			t.Fatalf("a copy was output: %v", topics(outs))
		}
	}
	if len(outs) != 2 || ledgerEvent(t, outs[0]).Outcome != ledger.OutcomeDuplicate || outs[1].Value != nil {
		t.Fatalf("want the duplicate note and the key's tombstone: %v", topics(outs))
	}
	m.OnCommit()
	if m.keys.Blocked() != 0 {
		t.Fatal("the key must be free again")
	}
}
