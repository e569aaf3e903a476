package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	"relay/internal/tiers"
	"relay/internal/txn"
)

// waitingMachine is the partition policy with no in-place retries: a
// transient failure waits 30s, then 5m.
func waitingMachine(maxAttempts int) (*Machine, *scriptedAdmitter, *time.Time) {
	now := t0
	a := &scriptedAdmitter{}
	m, _ := newMachine(a, &now)
	m.waitInPlace = true
	m.policy.BlockingAttempts, m.policy.MaxAttempts = 0, maxAttempts
	return m, a, &now
}

// notDue checks that a record waits, and returns until when.
func notDue(t *testing.T) func([]txn.Output, error) time.Time {
	return func(outs []txn.Output, err error) time.Time {
		t.Helper()
		var nd *txn.NotDueError
		if !errors.As(err, &nd) {
			t.Fatalf("want the record to wait, got %v, %v", topics(outs), err)
		}
		return nd.Until
	}
}

// Regression: a transaction handled 41 and 42 of a partition, 42 waited,
// and the transaction aborted; the rewind handled 41 again, which dropped
// 42's wait, so 42 was attempted again at once as attempt 1 with a fresh
// first failure: under repeated aborts the budget never applied. The wait
// survives the abort, and 42 stays due only when its wait ends.
func TestPartitionWaitSurvivesAbort(t *testing.T) {
	m, a, now := waitingMachine(5)
	unavailable := tiers.Failf(tiers.CauseRegistryUnavailable, "503")
	one(t)(m.Handle(context.Background(), source(41)))
	a.errs = []error{unavailable}
	notDue(t)(m.Handle(context.Background(), source(42)))
	m.OnAbort()
	*now = t0.Add(time.Second)
	one(t)(m.Handle(context.Background(), source(41)))
	calls := a.calls
	if until := notDue(t)(m.Handle(context.Background(), source(42))); !until.Equal(t0.Add(30*time.Second)) || a.calls != calls {
		t.Fatalf("after the rewind 42 waits until %v with %d new attempts; want its wait, until %v, and none", until, a.calls-calls, t0.Add(30*time.Second))
	}
	// Due: attempt 2, then the second delay; the budget counts from t0.
	for range 3 {
		*now = now.Add(6 * time.Minute)
		a.errs = []error{unavailable}
		notDue(t)(m.Handle(context.Background(), source(42)))
		m.OnAbort() // and again: the attempts made are not forgotten
		one(t)(m.Handle(context.Background(), source(41)))
	}
	*now = now.Add(6 * time.Minute)
	a.errs = []error{unavailable}
	out, f := one(t)(m.Handle(context.Background(), source(42)))
	if out.Topic != "orders.quarantine" || f.Attempt != 5 || !f.FirstFailedAt.Equal(t0) {
		t.Fatalf("%s attempt %d first failed %v; want quarantine at attempt 5, first failed %v", out.Topic, f.Attempt, f.FirstFailedAt, t0)
	}
}

// Regression: the waited-for record succeeded, its transaction aborted, and
// its next try started a new budget. Its wait is kept until a transaction
// that resolved it (or a record past it) commits.
func TestPartitionWaitKeptUntilItsEndCommits(t *testing.T) {
	m, a, now := waitingMachine(2)
	unavailable := tiers.Failf(tiers.CauseRegistryUnavailable, "503")
	a.errs = []error{unavailable}
	notDue(t)(m.Handle(context.Background(), source(42)))
	*now = t0.Add(31 * time.Second)
	one(t)(m.Handle(context.Background(), source(42))) // processed, attempt 2
	m.OnAbort()
	a.errs = []error{unavailable}
	out, f := one(t)(m.Handle(context.Background(), source(42)))
	if out.Topic != "orders.quarantine" || f.Attempt != 2 || !f.FirstFailedAt.Equal(t0) {
		t.Fatalf("%s attempt %d first failed %v; want its second attempt, quarantined", out.Topic, f.Attempt, f.FirstFailedAt)
	}
	m.OnCommit()
	if n := waitCount(m); n != 0 {
		t.Fatalf("%d waits after the record's end committed", n)
	}
	// A new record at the same offset of another topic, or a later one of
	// the partition, starts afresh.
	a.errs = []error{unavailable}
	if until := notDue(t)(m.Handle(context.Background(), source(43))); !until.Equal(now.Add(30 * time.Second)) {
		t.Fatalf("43 waits until %v", until)
	}
}

// After a commit whose outcome was unknown the loop reloads the state in
// place: the waits stay, as after an abort.
func TestPartitionWaitSurvivesReload(t *testing.T) {
	m, a, _ := waitingMachine(5)
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	notDue(t)(m.Handle(context.Background(), source(42)))
	m.OnAbort()
	if err := m.Reload(context.Background(), []int32{3}); err != nil || waitCount(m) != 1 {
		t.Fatalf("reload: %v, %d waits; want the wait kept", err, waitCount(m))
	}
}

// A partition's waits go with the partition.
func TestPartitionWaitForgottenOnRevoke(t *testing.T) {
	m, a, _ := waitingMachine(5)
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	notDue(t)(m.Handle(context.Background(), source(42)))
	m.OnRevoked([]int32{1})
	if waitCount(m) != 1 {
		t.Fatal("another partition's revoke dropped the wait")
	}
	m.OnRevoked([]int32{3})
	if waitCount(m) != 0 {
		t.Fatal("the wait outlived its partition")
	}
}

func waitCount(m *Machine) int { return m.waits.len() }
