package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/tiers"
	"relay/internal/txn"
)

func keyed(t *testing.T, hold bool) (*Machine, *scriptedAdmitter, *time.Time) {
	t.Helper()
	now := t0
	a := &scriptedAdmitter{}
	m, _ := newMachine(a, &now)
	m.policy.BlockingAttempts = 0
	m.keys, m.keyOrder = &KeyOrdering{StateTopic: "_relay.relay.state", Hold: hold}, true
	return m, a, &now
}

func rec(topic string, partition int32, offset int64, key string) *txn.Record {
	return &txn.Record{Topic: topic, Partition: partition, Offset: offset, Key: []byte(key), Value: []byte("v"), Timestamp: t0}
}

// asRead turns a written tier record into the record relay reads back.
func asRead(o txn.Output, offset int64) *txn.Record {
	return &txn.Record{Topic: o.Topic, Partition: o.Partition, Offset: offset, Key: o.Key, Value: o.Value, Headers: o.Headers, Timestamp: o.Timestamp}
}

func topics(outs []txn.Output) []string {
	var ts []string
	for _, o := range outs {
		ts = append(ts, o.Topic)
	}
	return ts
}

func stateOf(t *testing.T, o txn.Output) *keyState {
	t.Helper()
	if o.Value == nil {
		return nil
	}
	var s keyState
	if err := json.Unmarshal(o.Value, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// TestKeyOrderingFollowersWaitForTheirHead: A1 fails and goes to a tier;
// A2 follows it there without being tried; B1 (another key) is processed
// at once; A2 read before its turn goes back behind; A1 succeeds, then A2;
// the key is unblocked. Every change comes with its state record.
func TestKeyOrderingFollowersWaitForTheirHead(t *testing.T) {
	m, a, now := keyed(t, false)
	unavailable := tiers.Failf(tiers.CauseRegistryUnavailable, "503")
	a.errs = []error{unavailable}
	outs, err := m.Handle(context.Background(), rec("orders", 0, 10, "A"))
	if err != nil || len(outs) != 2 || outs[0].Topic != "orders.retry.30s" || outs[1].Topic != "_relay.relay.state" {
		t.Fatalf("A1: %v %v", topics(outs), err)
	}
	a1 := outs[0]
	if s := stateOf(t, outs[1]); s.Next != 0 || s.Tail != 1 || s.Head != "orders/0/10" {
		t.Fatalf("A1 state %+v", s)
	}
	calls := a.calls
	outs, _ = m.Handle(context.Background(), rec("orders", 0, 11, "A"))
	if len(outs) != 2 || outs[0].Topic != "orders.retry.30s" || a.calls != calls {
		t.Fatalf("A2 must follow without an attempt: %v, calls %d", topics(outs), a.calls-calls)
	}
	a2 := outs[0]
	if f, _ := envelope.Parse(a2.Headers); f.Code != CodeKeyBlocked || !f.NotBefore.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("A2 envelope %+v", f)
	}
	if s := stateOf(t, outs[1]); s.Tail != 2 {
		t.Fatalf("A2 state %+v", s)
	}
	outs, _ = m.Handle(context.Background(), rec("orders", 0, 12, "B"))
	if len(outs) != 1 || outs[0].Topic != "orders.valid" {
		t.Fatalf("B1 must not wait: %v", topics(outs))
	}
	m.OnCommit()
	*now = t0.Add(31 * time.Second)
	// A2 comes first: not its turn.
	outs, _ = m.Handle(context.Background(), asRead(a2, 0))
	if len(outs) != 1 || outs[0].Topic != "orders.retry.30s" || keySeq(outs[0].Headers) != 1 {
		t.Fatalf("A2 before A1: %v", topics(outs))
	}
	outs, _ = m.Handle(context.Background(), asRead(a1, 1))
	if len(outs) != 2 || outs[0].Topic != "orders.valid" || stateOf(t, outs[1]).Next != 1 {
		t.Fatalf("A1 at its turn: %v", topics(outs))
	}
	outs, _ = m.Handle(context.Background(), asRead(a2, 3))
	if len(outs) != 2 || outs[0].Topic != "orders.valid" || outs[1].Value != nil {
		t.Fatalf("A2 at its turn: %v, tombstone %v", topics(outs), outs[1].Value)
	}
	if m.keys.Blocked() != 0 {
		t.Fatal("the key must be free again")
	}
	if id, _ := envelope.Lookup(outs[0].Headers, envelope.MessageID); string(id) != "orders/0/11" {
		t.Fatalf("A2's identity %q", id)
	}
}

func TestKeyOrderingAbortRestoresState(t *testing.T) {
	m, a, _ := keyed(t, false)
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	_, _ = m.Handle(context.Background(), rec("orders", 0, 10, "A"))
	m.OnAbort()
	if m.keys.Blocked() != 0 {
		t.Fatal("an aborted transaction's state change must be undone")
	}
	outs, _ := m.Handle(context.Background(), rec("orders", 0, 10, "A"))
	if len(outs) != 1 || outs[0].Topic != "orders.valid" {
		t.Fatalf("after the abort the key is free: %v", topics(outs))
	}
}

func TestKeyOrderingHoldQuarantinesFollowers(t *testing.T) {
	for _, hold := range []bool{true, false} {
		m, a, now := keyed(t, hold)
		m.policy.MaxAttempts = 2
		unavailable := tiers.Failf(tiers.CauseRegistryUnavailable, "503")
		a.errs = []error{unavailable}
		outs, _ := m.Handle(context.Background(), rec("orders", 0, 10, "A"))
		a1 := outs[0]
		outs, _ = m.Handle(context.Background(), rec("orders", 0, 11, "A"))
		a2 := outs[0]
		*now = t0.Add(31 * time.Second)
		a.errs = []error{unavailable}
		outs, _ = m.Handle(context.Background(), asRead(a1, 0))
		if outs[0].Topic != "orders.quarantine" {
			t.Fatalf("A1 exhausted: %v", topics(outs))
		}
		outs, _ = m.Handle(context.Background(), asRead(a2, 1))
		f, _ := envelope.Parse(outs[0].Headers)
		switch {
		case hold && (outs[0].Topic != "orders.quarantine" || f.Code != CodeKeyHeld || f.Class != "ordering"):
			t.Fatalf("hold: A2 went to %s %+v", outs[0].Topic, f)
		case !hold && outs[0].Topic != "orders.valid":
			t.Fatalf("release: A2 went to %s", outs[0].Topic)
		}
		if m.keys.Blocked() != 0 {
			t.Fatalf("hold=%v: key still blocked", hold)
		}
	}
}

func TestKeyOrderingRestoreAndForget(t *testing.T) {
	m, _, _ := keyed(t, false)
	st, _ := json.Marshal(keyState{Next: 3, Tail: 5, Tier: 1, NotBefore: t0, Head: "orders/2/7"})
	loads := 0
	m.settled = &ledger.Settled{}
	m.loadState = func(_ context.Context, ps []int32) (map[string][]byte, error) {
		loads++
		if len(ps) != 2 || ps[0] != 2 {
			return nil, nil
		}
		return map[string][]byte{stateKey("orders", 2, []byte("A")): st, stateKey("orders", 2, []byte("gone")): nil}, nil
	}
	if err := m.OnAssigned(context.Background(), []int32{2, 3}); err != nil {
		t.Fatal(err)
	}
	outs, _ := m.Handle(context.Background(), rec("orders", 2, 50, "A"))
	if len(outs) != 2 || outs[0].Topic != "orders.retry.5m" || keySeq(outs[0].Headers) != 5 {
		t.Fatalf("a restored blocked key must make new records follow: %v", topics(outs))
	}
	_ = m.OnAssigned(context.Background(), []int32{2})
	if loads != 1 {
		t.Fatalf("loaded %d times; partitions already loaded are not read again", loads)
	}
	m.OnRevoked([]int32{2})
	if m.keys.Blocked() != 0 {
		t.Fatal("forget must drop the revoked partition's keys")
	}
	m.loadState = func(context.Context, []int32) (map[string][]byte, error) { return nil, errors.New("broker away") }
	if err := m.OnAssigned(context.Background(), []int32{2}); err == nil {
		t.Fatal("a failed restore must be an error, not an empty state")
	}
}

// TestFollowerFirstPassRetriesInPlace: a follower that fails at its turn is
// on its first pass: it is retried in place, then goes to the first tier,
// not to the tier after the one it waited in.
func TestFollowerFirstPassRetriesInPlace(t *testing.T) {
	m, a, now := keyed(t, false)
	m.policy.BlockingAttempts = 1
	unavailable := tiers.Failf(tiers.CauseRegistryUnavailable, "503")
	a.errs = []error{unavailable, unavailable}
	outs, _ := m.Handle(context.Background(), rec("orders", 0, 10, "A"))
	a1 := outs[0]
	outs, _ = m.Handle(context.Background(), rec("orders", 0, 11, "A"))
	a2 := outs[0]
	m.OnCommit()
	*now = t0.Add(31 * time.Second)
	if outs, _ = m.Handle(context.Background(), asRead(a1, 0)); outs[0].Topic != "orders.valid" {
		t.Fatalf("A1: %v", topics(outs))
	}
	a.errs = []error{unavailable, unavailable}
	calls := a.calls
	outs, _ = m.Handle(context.Background(), asRead(a2, 1))
	f, _ := envelope.Parse(outs[0].Headers)
	if a.calls-calls != 2 || outs[0].Topic != "orders.retry.30s" || f.Attempt != 2 || !f.FirstFailedAt.Equal(*now) {
		t.Fatalf("A2 at its turn: %d calls, %s, %+v", a.calls-calls, outs[0].Topic, f)
	}
}

// A follower says which head it waits behind (relay.key.head) and, while
// it hops behind that same head, since when (relay.first.failed.at): so
// relay audit can tell a key whose head never settles. Behind another
// head, the wait starts again.
func TestFollowersSayBehindWhomAndSinceWhen(t *testing.T) {
	m, a, now := keyed(t, false)
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	_, _ = m.Handle(context.Background(), rec("orders", 0, 10, "A"))
	outs, _ := m.Handle(context.Background(), rec("orders", 0, 11, "A"))
	a2 := outs[0]
	if f, _ := envelope.Parse(a2.Headers); f.KeyHead != "orders/0/10" || !f.FirstFailedAt.Equal(t0) {
		t.Fatalf("A2's first hop: head %q since %v", f.KeyHead, f.FirstFailedAt)
	}
	m.OnCommit()
	*now = t0.Add(31 * time.Second)
	outs, _ = m.Handle(context.Background(), asRead(a2, 0)) // before A1: hops again
	f, _ := envelope.Parse(outs[0].Headers)
	if f.Code != CodeKeyBlocked || f.KeyHead != "orders/0/10" || !f.FirstFailedAt.Equal(t0) || !f.LastFailedAt.Equal(*now) {
		t.Fatalf("A2's second hop: %s behind %q since %v (last %v); want behind orders/0/10 since %v", f.Code, f.KeyHead, f.FirstFailedAt, f.LastFailedAt, t0)
	}
	m.OnCommit()
	// A copy that waited behind another head (the one before this) starts
	// its wait again.
	other := asRead(outs[0], 1)
	other.Headers = append(envelope.Strip(other.Headers), envelope.AppendFailure([]txn.Header(nil), &envelope.Failure{ID: f.ID, SourceTopic: "orders",
		SourceOffset: 11, Attempt: 0, FirstFailedAt: t0, LastFailedAt: t0, NotBefore: t0, Class: f.Class, Code: CodeKeyBlocked, KeyHead: "orders/0/9"})...)
	other.Headers = append(other.Headers, txn.Header{Key: envelope.KeySeq, Value: []byte("1")})
	*now = t0.Add(40 * time.Second)
	outs, _ = m.Handle(context.Background(), other)
	if f, _ := envelope.Parse(outs[0].Headers); f.KeyHead != "orders/0/10" || !f.FirstFailedAt.Equal(*now) {
		t.Fatalf("behind a new head: %q since %v; want since %v", f.KeyHead, f.FirstFailedAt, *now)
	}
}
