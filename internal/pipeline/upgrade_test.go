package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"relay/internal/envelope"
	"relay/internal/keyorder"
	"relay/internal/ledger"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// shrunk is a key-ordering machine whose tiers were 30s,5m and are now
// 30s only, with key A of partition 0 restored from the state topic, its
// head in the tier that is gone (index 1).
func shrunk(t *testing.T, tier int) *Machine {
	t.Helper()
	m, _, _ := keyed(t, false)
	m.table = NewTable([]Routes{{Source: "orders", Output: "orders.valid", Quarantine: "orders.quarantine", Rejected: "orders.rejected",
		Tiers: []string{"orders.retry.30s"}}})
	m.policy.Tiers = m.policy.Tiers[:1]
	st, _ := json.Marshal(keyState{Next: 0, Tail: 2, Tier: tier, NotBefore: t0.Add(4 * time.Minute), Head: "orders/0/10"})
	m.loadState = func(context.Context, []int32) (map[string][]byte, error) {
		return map[string][]byte{stateKey("orders", 0, []byte("A")): st}, nil
	}
	if err := m.OnAssigned(context.Background(), []int32{0}); err != nil {
		t.Fatal(err)
	}
	return m
}

// Regression: with RELAY_RETRY_TIERS=30s,5m and a key's head in the 5m
// tier, relay restarted with 30s only panicked (index out of range in
// follow) on the key's next record, on every restart. A follower of a head
// whose tier is gone goes to the last configured tier, due with the head:
// it is tried only at its turn, so its place in the queue, not its tier,
// keeps the key's order.
func TestFollowerOfRemovedTierGoesToLastTier(t *testing.T) {
	for _, tier := range []int{1, 7, -1} {
		m := shrunk(t, tier)
		outs, err := m.Handle(context.Background(), rec("orders", 0, 12, "A"))
		if err != nil || len(outs) != 2 || outs[0].Topic != "orders.retry.30s" || keySeq(outs[0].Headers) != 2 {
			t.Fatalf("tier %d: %v %v", tier, topics(outs), err)
		}
		if f, _ := envelope.Parse(outs[0].Headers); f.Code != CodeKeyBlocked || !f.NotBefore.Equal(t0.Add(4*time.Minute)) {
			t.Fatalf("tier %d: follower %+v", tier, f)
		}
	}
}

// State records carry a format version: key states are written with
// "v":1; a record without one is version 1 (written before versions).
// A record of a newer version stops relay (a *keyorder.NewerError naming
// the key and both versions) rather than be skipped: skipping it would let
// the key's records past its head.
func TestKeyStateFormatVersion(t *testing.T) {
	m, a, _ := keyed(t, false)
	a.errs = []error{errUnavailable()}
	outs, _ := m.Handle(context.Background(), rec("orders", 0, 10, "A"))
	var v struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(outs[1].Value, &v); err != nil || v.V != 1 {
		t.Fatalf("state record %s: version %d (%v), want 1", outs[1].Value, v.V, err)
	}
	k := &KeyOrdering{StateTopic: "_relay.relay.state"}
	err := k.Restore(map[string][]byte{
		stateKey("orders", 0, []byte("old")): []byte(`{"next":1,"tail":3,"tier":0}`),
		stateKey("orders", 0, []byte("v1")):  []byte(`{"v":1,"next":0,"tail":1,"tier":1}`),
	})
	if err != nil || k.Blocked() != 2 {
		t.Fatalf("restore: err %v, %d blocked; want both restored", err, k.Blocked())
	}
	if s := k.get(stateKey("orders", 0, []byte("old"))); s.Next != 1 || s.Tail != 3 {
		t.Fatalf("unversioned record read as %+v", s)
	}
	err = k.Restore(map[string][]byte{stateKey("orders", 0, []byte("newer")): []byte(`{"v":3,"queue":[1,2]}`)})
	var newer *keyorder.NewerError
	if !errors.As(err, &newer) || newer.Version != 3 || newer.Reads != 2 || !strings.Contains(err.Error(), "newer") ||
		!strings.Contains(err.Error(), "_relay.relay.state") {
		t.Fatalf("restore of a version 3 key state = %v, want a NewerError naming the topic and versions 3 and 2", err)
	}
}

func errUnavailable() error { return tiers.Failf(tiers.CauseRegistryUnavailable, "503") }

// A tier topic of an earlier configuration that still holds records is
// read as the configured tier it stands for: its records reach their end
// state or go on to a configured tier, never back to it.
func TestRetiredTierIsRead(t *testing.T) {
	m, a, now := keyed(t, false)
	m.table = NewTable([]Routes{{Source: "orders", Output: "orders.valid", Quarantine: "orders.quarantine", Rejected: "orders.rejected",
		Tiers: []string{"orders.retry.30s"}, Retired: []RetiredTier{{Topic: "orders.retry.5m", Tier: 0}}}})
	m.policy.Tiers = m.policy.Tiers[:1]
	f := &envelope.Failure{ID: "orders/0/10", SourceTopic: "orders", SourcePartition: 0, SourceOffset: 10, Attempt: 2, ConsumerGroup: "relay",
		FirstFailedAt: t0, LastFailedAt: t0, NotBefore: t0.Add(time.Minute), Class: "transient", Code: "HOOK_UNAVAILABLE"}
	old := &txn.Record{Topic: "orders.retry.5m", Partition: 0, Offset: 3, Key: []byte("A"), Value: []byte("v"), Headers: envelope.AppendFailure([]txn.Header(nil), f), Timestamp: t0}
	*now = t0.Add(2 * time.Minute)
	a.errs = []error{errUnavailable()}
	outs, err := m.Handle(context.Background(), old)
	if err != nil || len(outs) != 2 || outs[0].Topic != "orders.retry.30s" {
		t.Fatalf("failing again: %v %v; want the configured tier", topics(outs), err)
	}
	if g, _ := envelope.Parse(outs[0].Headers); g.Attempt != 3 || !g.FirstFailedAt.Equal(t0) {
		t.Fatalf("its budget goes on: %+v", g)
	}
	m.OnAbort()
	out, _ := one(t)(m.Handle(context.Background(), old))
	if out.Topic != "orders.valid" {
		t.Fatalf("passing: %s", out.Topic)
	}
	// Another group's record (groups can share tier topic names) is left
	// to that group.
	other := *old
	g := *f
	g.ConsumerGroup = "other"
	other.Headers = envelope.AppendFailure([]txn.Header(nil), &g)
	if outs, err := m.Handle(context.Background(), &other); err != nil || len(outs) != 0 {
		t.Fatalf("another group's record: %v %v; want it passed over", topics(outs), err)
	}
	// Under partition ordering there are no tier topics: it waits in place.
	m.keys, m.keyOrder, m.waitInPlace = &KeyOrdering{}, false, true
	m.table = NewTable([]Routes{{Source: "orders", Output: "orders.valid", Quarantine: "orders.quarantine", Rejected: "orders.rejected",
		Retired: []RetiredTier{{Topic: "orders.retry.5m", Tier: 0}}}})
	a.errs = []error{errUnavailable()}
	if until := notDue(t)(m.Handle(context.Background(), old)); !until.Equal(now.Add(30 * time.Second)) {
		t.Fatalf("partition ordering: waits until %v", until)
	}
}

// With key ordering switched off, the key states it left in the state
// topic are deleted with the first transaction of their partition.
// Regression: left in place, switching back to key ordering later would
// restore them and send every new record of their keys after a head that
// was handled long ago: they would follow it from tier to tier forever.
func TestStaleKeyStatesDeleted(t *testing.T) {
	now := t0
	m, _ := newMachine(&scriptedAdmitter{}, &now)
	m.stateTopic, m.settled = "_relay.relay.state", &ledger.Settled{}
	sk := stateKey("orders", 3, []byte("A"))
	m.loadState = func(context.Context, []int32) (map[string][]byte, error) {
		return map[string][]byte{sk: []byte(`{"v":1,"next":0,"tail":2,"tier":1}`), stateKey("orders", 3, []byte("gone")): nil}, nil
	}
	if err := m.OnAssigned(context.Background(), []int32{3}); err != nil {
		t.Fatal(err)
	}
	tombstone := func(outs []txn.Output) bool {
		for _, o := range outs {
			if o.Topic == "_relay.relay.state" && string(o.Key) == sk && o.Value == nil && o.Partition == 3 {
				return true
			}
		}
		return false
	}
	outs, err := m.Handle(context.Background(), source(1))
	if err != nil || !tombstone(outs) || len(outs) != 2 {
		t.Fatalf("first record: %v %v; want its output and the key state's tombstone", topics(outs), err)
	}
	m.OnAbort()
	if outs, _ = m.Handle(context.Background(), source(1)); !tombstone(outs) {
		t.Fatal("an aborted tombstone must be written again")
	}
	m.OnCommit()
	if outs, _ = m.Handle(context.Background(), source(2)); len(outs) != 1 {
		t.Fatalf("after the commit: %v", topics(outs))
	}
}
