package pipeline

import (
	"errors"
	"testing"
	"time"

	"relay/internal/tiers"
)

// decided sends a record where its verdict says, counts it once the
// transaction commits, and notes an end only for a record that had failed
// before in its pass.
func TestDecidedRoutesAndCounts(t *testing.T) {
	now := t0
	m, counted := newMachine(nil, &now)
	p := &pass{rec: source(4), origin: Origin{Routes: m.table.byTopic["orders"].Routes, Tier: -1}, id: "orders/3/4",
		st: tiers.State{Attempt: 1, FirstFailedAt: t0}}
	cause := errors.New("no")
	outs := m.decided(p, verdict{Decision: tiers.Decision{Kind: tiers.Reject, Class: tiers.Rejected, Code: "REJECTED_X"}, cause: cause})
	if len(outs) != 1 || outs[0].Topic != "orders.rejected" {
		t.Fatalf("rejected: %v", topics(outs))
	}
	outs = m.decided(p, verdict{Decision: tiers.Decision{Kind: tiers.RetryTier, Tier: 1, Delay: 5 * time.Minute, Class: tiers.Transient, Code: "T"}, cause: cause})
	if len(outs) != 1 || outs[0].Topic != "orders.retry.5m" || !outs[0].Timestamp.Equal(now) {
		t.Fatalf("tier: %v", topics(outs))
	}
	p.st.Attempt = 3
	outs = m.decided(p, verdict{Decision: tiers.Decision{Kind: tiers.Quarantine, Class: tiers.Transient, Code: "T_EXHAUSTED"}, cause: cause})
	if len(outs) != 1 || outs[0].Topic != "orders.quarantine" {
		t.Fatalf("quarantine: %v", topics(outs))
	}
	if len(counted) != 0 {
		t.Fatal("nothing is reported before the commit")
	}
	m.OnCommit()
	if counted["rejected/REJECTED_X"] != 1 || counted["retry/T"] != 1 || counted["quarantined/T_EXHAUSTED"] != 1 ||
		counted["ended/quarantined"] != 3 || counted["ended/rejected"] != 0 {
		t.Fatalf("counted %v", counted)
	}
}
