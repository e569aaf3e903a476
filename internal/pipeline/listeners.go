package pipeline

import (
	"context"
	"fmt"
	"relay/internal/keyorder"
	"relay/internal/txn"
)

// The machine follows the transaction loop: what a transaction did is
// kept once it commits and undone when it aborts, and the state of the
// partitions it is assigned is restored from the state topic.

// OnCommit reports the outcomes of the committed transaction.
func (m *Machine) OnCommit() {
	m.waits.commit()
	m.stale.commit()
	m.keys.commit()
	m.settled.Commit()
	m.report()
	m.forget()
	m.publishParked()
}

// OnAbort forgets the outcomes of the aborted transaction: its records
// will be handled again.
func (m *Machine) OnAbort() {
	m.forget()
	m.waits.abort()
	m.stale.abort()
	m.keys.abort()
	m.settled.Abort()
	m.publishParked()
}

// OnAssigned implements txn.PartitionListener: the blocked keys (key
// ordering) and the settled failures (ledger) of the partitions are
// restored from the state topic before their records are handled.
func (m *Machine) OnAssigned(ctx context.Context, partitions []int32) error {
	var todo []int32
	for _, p := range partitions {
		if !m.loaded[p] {
			todo = append(todo, p)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	entries, err := m.loadState(ctx, todo)
	if err != nil {
		return fmt.Errorf("restore state of partitions %v from %s: %w", todo, m.stateTopic, err)
	}
	if err := m.restoreKeys(entries, todo); err != nil {
		return err
	}
	for _, err := range m.settled.Restore(entries) {
		m.log.Warn("unreadable ledger record skipped", "topic", m.stateTopic, "err", err)
	}
	for _, p := range todo {
		m.loaded[p] = true
	}
	m.log.Info("state restored", "partitions", todo, "blocked_keys", m.keys.Blocked(), "settled_failures", m.settled.Len())
	return nil
}

// restoreKeys restores the blocked keys among state-topic entries under
// key ordering; with another policy it notes the key states to delete.
func (m *Machine) restoreKeys(entries map[string][]byte, partitions []int32) error {
	if !m.keyOrder {
		if m.stateTopic == "" {
			return nil
		}
		if n := m.stale.restore(entries); n > 0 {
			m.log.Warn("key ordering is off: deleting the key states it left; their keys' records are handled without key order",
				"topic", m.stateTopic, "partitions", partitions, "key_states", n)
		}
		return nil
	}
	return m.keys.Restore(entries)
}

// OnRevoked implements txn.PartitionListener.
func (m *Machine) OnRevoked(partitions []int32) {
	m.forgetState(partitions)
	m.waits.forget(partitions)
	m.publishParked()
}

// Reload implements txn.StateReloader: after a commit whose outcome was
// unknown, the durable state of the partitions is read again; their waits
// (partition ordering) stay, as they do after an abort.
func (m *Machine) Reload(ctx context.Context, partitions []int32) error {
	// The parked records stay in memory, and the parked sets of the
	// partitions the loop rewound stay read: what the state topic says
	// of their keys places them again.
	m.keys.ForgetStates(partitions)
	m.forgetDurable(partitions)
	return m.OnAssigned(ctx, partitions)
}

// forgetState drops what the state topic holds of the partitions, and
// what key ordering keeps of them in memory.
func (m *Machine) forgetState(partitions []int32) {
	m.keys.Forget(partitions)
	m.forgetDurable(partitions)
}

// forgetDurable drops the ledger and the stale key states of the
// partitions, as read from the state topic.
func (m *Machine) forgetDurable(partitions []int32) {
	m.settled.Forget(partitions)
	for _, p := range partitions {
		delete(m.loaded, p)
	}
	m.stale.forget(partitions)
}

// Floor implements txn.Floors: a partition with parked records commits
// at the lowest, with the parked set as metadata.
func (m *Machine) Floor(tp txn.TopicPartition, next int64) (int64, string) {
	return m.keys.Floor(keyorder.Part(tp), next)
}

// Resume implements txn.Floors: a partition read again drops its parked
// records from memory (they are read again too), and the parked set it
// was committed with says which of its records are settled.
func (m *Machine) Resume(tp txn.TopicPartition, offset int64, metadata string) error {
	defer m.publishParked()
	return m.keys.Resume(keyorder.Part(tp), offset, metadata)
}

// Due implements txn.Floors: the parked records whose turn has come.
// Parking stops while the group does not agree on it (KeyOrdering.Agreed),
// checked here, in the loop's goroutine, at every round.
func (m *Machine) Due() []*txn.Record {
	m.keys.agree()
	return append(m.lostCarriers(), m.keys.Ready()...)
}

// MetadataRefused implements txn.MetadataRefuser: parking stops until
// relay restarts, and the parked followers are copied into their heads'
// tiers, so the commits' metadata shrinks back under the brokers' limit.
func (m *Machine) MetadataRefused() {
	if m.keys == nil {
		return
	}
	m.log.Warn("the brokers refused a commit's parked set as too large (OFFSET_METADATA_TOO_LARGE): parking is off until relay restarts, and parked followers are copied into their head's tier",
		"hint", "raise the brokers' offset.metadata.max.bytes, or lower RELAY_KEY_PARK_MAX_RECORDS")
	m.keys.RefuseParking()
}

// ParkStats is what key ordering holds parked, and the followers it
// copied instead (by reason, since start).
type ParkStats struct {
	keyorder.Stats
	Refused map[string]int64
	// Lost counts the parked records found gone from their source.
	Lost int64
}

// ParkStats is the parked records as of the last commit, abort or
// assignment change. Safe for concurrent use.
func (m *Machine) ParkStats() ParkStats {
	if s := m.parkStats.Load(); s != nil {
		return *s
	}
	return ParkStats{}
}

func (m *Machine) publishParked() {
	s := &ParkStats{Stats: m.keys.Stats(), Refused: make(map[string]int64, len(m.refused)), Lost: m.lost.total}
	for why, n := range m.refused {
		s.Refused[why] = n
	}
	m.parkStats.Store(s)
}
