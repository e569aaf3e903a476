package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"relay/internal/ledger"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// fakeDiscards answers from a set, or with err; it records what it was
// asked.
type fakeDiscards struct {
	ids   map[string]bool
	err   error
	asked []string
}

func (d *fakeDiscards) Discarded(_ context.Context, p int32, id string) (bool, error) {
	d.asked = append(d.asked, fmt.Sprintf("%s@%d", id, p))
	return d.ids[id], d.err
}

// A failure discarded while its replayed record waited in a tier: at the
// record's turn relay sees the discard, outputs nothing, calls nothing,
// notes it in the ledger and lets the key go on. Before the fix the record
// was output and resolved next to the operator's discard.
func TestDiscardedWhileInATierIsNotOutput(t *testing.T) {
	m, a, now, counted := ledgered(t)
	m.policy.BlockingAttempts = 0
	m.keys, m.keyOrder = &KeyOrdering{StateTopic: m.stateTopic}, true
	d := &fakeDiscards{ids: map[string]bool{}}
	m.discards = d
	ctx := context.Background()
	q := quarantineOne(t, m, a)
	a.errs = []error{tiers.Failf(tiers.CauseRegistryUnavailable, "503")}
	outs, err := m.Handle(ctx, replayRecord(q, 0, 1))
	if err != nil || len(outs) != 2 || outs[0].Topic != "orders.retry.30s" {
		t.Fatalf("transient on replay: %v %v", topics(outs), err)
	}
	m.OnCommit()
	if len(d.asked) != 1 || d.asked[0] != "orders/3/9@3" {
		t.Fatalf("asked %v; want the failure, in its source partition, at the replay's turn", d.asked)
	}
	d.ids["orders/3/9"] = true // an operator discards it while it waits
	*now = t0.Add(time.Minute)
	calls := a.calls
	outs, err = m.Handle(ctx, asRead(outs[0], 0))
	if err != nil || len(outs) != 2 || a.calls != calls {
		t.Fatalf("at its turn: %v %v, %d attempts; want a note and the key's tombstone, no attempt", topics(outs), err, a.calls-calls)
	}
	e := ledgerEvent(t, outs[0])
	if e.State != ledger.Discarded || e.Outcome != ledger.OutcomeDuplicate || e.ReplayCount != 1 || e.ReplayID != "rp-1" ||
		!strings.Contains(e.Reason, "discarded") || outs[0].Partition != 3 {
		t.Fatalf("note %+v", e)
	}
	if outs[1].Topic != m.stateTopic || outs[1].Value != nil {
		t.Fatalf("the key must be released: %v", topics(outs))
	}
	m.OnCommit()
	if counted["replay/duplicate"] != 1 || counted["replay/resolved"] != 0 || m.keys.Blocked() != 0 {
		t.Fatalf("counted %v, blocked %d", counted, m.keys.Blocked())
	}
}

// When relay cannot tell (its ledger reader is behind), the record waits
// paused; it is neither output nor dropped. Records that are not replays
// never ask.
func TestUnknownDiscardWaits(t *testing.T) {
	m, a, now, _ := ledgered(t)
	d := &fakeDiscards{err: fmt.Errorf("%w: at 5 of 7", ErrNotRead)}
	m.discards = d
	ctx := context.Background()
	q := quarantineOne(t, m, a)
	if len(d.asked) != 0 {
		t.Fatal("a source record must not ask")
	}
	for _, wait := range []time.Duration{discardRetry, discardBackoff} {
		outs, err := m.Handle(ctx, replayRecord(q, 0, 1))
		var nd *txn.NotDueError
		if !errors.As(err, &nd) || len(outs) != 0 || !nd.Until.Equal(now.Add(wait)) {
			t.Fatalf("%v %v; want it to wait %s", topics(outs), err, wait)
		}
		d.err = errors.New("no answer from the broker")
	}
	d.err = nil
	outs, err := m.Handle(ctx, replayRecord(q, 0, 1))
	if err != nil || len(outs) != 2 || outs[0].Topic != "orders.valid" || ledgerEvent(t, outs[1]).State != ledger.Resolved {
		t.Fatalf("not discarded: %v %v; want output and resolved", topics(outs), err)
	}
}
