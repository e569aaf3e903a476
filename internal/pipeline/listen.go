package pipeline

import (
	"context"
	"fmt"

	"relay/internal/ledger"
	"relay/internal/tiers"
	"relay/internal/txn"
)

func (m *Machine) count(outcome ledger.Outcome, code string) {
	if m.pending.outcomes == nil {
		m.pending.outcomes = map[outcomeCode]int{}
	}
	m.pending.outcomes[outcomeCode{outcome, code}]++
}

// replayed counts a replayed record that reached a ledger state or was a
// duplicate.
func (m *Machine) replayed(outcome string) {
	if m.pending.replays == nil {
		m.pending.replays = map[string]int{}
	}
	m.pending.replays[outcome]++
}

// end notes a record that had failed and reached an end state.
func (m *Machine) end(outcome ledger.Outcome, st tiers.State) {
	m.pending.ended = append(m.pending.ended, ended{outcome, st.Attempt, m.Now().Sub(st.FirstFailedAt)})
}

func (m *Machine) forget() {
	clear(m.pending.outcomes)
	clear(m.pending.replays)
	m.pending.ended = m.pending.ended[:0]
}

// OnCommit reports the outcomes of the committed transaction.
func (m *Machine) OnCommit() {
	m.waits.commit()
	m.stale.commit()
	if m.Keys != nil {
		m.Keys.commit()
	}
	if m.Settled != nil {
		m.Settled.Commit()
	}
	if m.Outcomes != nil {
		for k, n := range m.pending.outcomes {
			m.Outcomes.Outcome(k.outcome, k.code, n)
		}
		for k, n := range m.pending.replays {
			m.Outcomes.Replayed(k, n)
		}
		for _, e := range m.pending.ended {
			m.Outcomes.Ended(e.outcome, e.attempts, e.elapsed)
		}
	}
	m.forget()
}

// OnAbort forgets the outcomes of the aborted transaction: its records
// will be handled again.
func (m *Machine) OnAbort() {
	m.forget()
	m.waits.abort()
	m.stale.abort()
	if m.Keys != nil {
		m.Keys.abort()
	}
	if m.Settled != nil {
		m.Settled.Abort()
	}
}

// OnAssigned implements txn.PartitionListener: the blocked keys (key
// ordering) and the settled failures (ledger) of the partitions are
// restored from the state topic before their records are handled.
func (m *Machine) OnAssigned(ctx context.Context, partitions []int32) error {
	if (m.Keys == nil && m.Settled == nil) || m.LoadState == nil {
		return nil
	}
	if m.loaded == nil {
		m.loaded = map[int32]bool{}
	}
	var todo []int32
	for _, p := range partitions {
		if !m.loaded[p] {
			todo = append(todo, p)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	entries, err := m.LoadState(ctx, todo)
	if err != nil {
		return fmt.Errorf("restore state of partitions %v from %s: %w", todo, m.StateTopic, err)
	}
	if m.Keys != nil {
		skipped, err := m.Keys.Restore(entries)
		for _, err := range skipped {
			m.Log.Warn("key state of a newer format skipped", "topic", m.StateTopic, "err", err)
		}
		if err != nil {
			return err
		}
	}
	if m.Keys == nil && m.StateTopic != "" {
		if n := m.stale.restore(entries); n > 0 {
			m.Log.Warn("key ordering is off: deleting the key states it left; their keys' records are handled without key order",
				"topic", m.StateTopic, "partitions", todo, "key_states", n)
		}
	}
	if m.Settled != nil {
		for _, err := range m.Settled.Restore(entries) {
			m.Log.Warn("unreadable ledger record skipped", "topic", m.StateTopic, "err", err)
		}
	}
	for _, p := range todo {
		m.loaded[p] = true
	}
	m.Log.Info("state restored", "partitions", todo, "blocked_keys", m.blocked(), "settled_failures", m.settled())
	return nil
}

func (m *Machine) blocked() int {
	if m.Keys == nil {
		return 0
	}
	return m.Keys.Blocked()
}

func (m *Machine) settled() int {
	if m.Settled == nil {
		return 0
	}
	return m.Settled.Len()
}

// OnRevoked implements txn.PartitionListener.
func (m *Machine) OnRevoked(partitions []int32) {
	m.forgetState(partitions)
	m.waits.forget(partitions)
}

// Reload implements txn.StateReloader: after a commit whose outcome was
// unknown, the durable state of the partitions is read again; their waits
// (partition ordering) stay, as they do after an abort.
func (m *Machine) Reload(ctx context.Context, partitions []int32) error {
	m.forgetState(partitions)
	return m.OnAssigned(ctx, partitions)
}

// forgetState drops what the state topic holds of the partitions.
func (m *Machine) forgetState(partitions []int32) {
	if m.Keys != nil {
		m.Keys.Forget(partitions)
	}
	if m.Settled != nil {
		m.Settled.Forget(partitions)
	}
	for _, p := range partitions {
		delete(m.loaded, p)
	}
	m.stale.forget(partitions)
}

var (
	_ txn.Handler           = (*Machine)(nil)
	_ txn.PartitionListener = (*Machine)(nil)
	_ txn.TxnListener       = (*Machine)(nil)
	_ txn.StateReloader     = (*Machine)(nil)
)
