package pipeline

import (
	"fmt"

	"relay/internal/keyorder"
	"relay/internal/txn"
)

// KeyOrdering keeps per-key order (RELAY_ORDERING=key). While a key has a
// record in a retry tier (its head), later records of the key follow it,
// numbered (relay.key.seq), and each is processed only when every earlier
// one is resolved. A follower is parked (kept in memory; its source
// partition commits no further than the lowest parked record, and the
// commit's metadata says which records above it are settled) while Park
// allows, else copied into the head's tier. Records of other keys are not
// held back.
//
// The state of every blocked key is durable: each change is a record of the
// compacted state topic, written in the transaction of the record that
// caused it, in the partition of the record's source partition number, and
// restored (Restore, through Machine.OnAssigned) before the partition is
// processed again. Memory holds one small entry per blocked key, and the
// parked records.
type KeyOrdering struct {
	// StateTopic is the compacted state topic.
	StateTopic string
	// Hold quarantines the followers of a quarantined head (KEY_HELD);
	// without it they go on.
	Hold bool
	// Park bounds parking; its zero value parks nothing.
	Park keyorder.Limits
	// Agreed, when set, says whether every member of the group parks
	// (features.Park): until it does, nothing new is parked. Withdrawn
	// says it has not for long: what is parked is copied into the heads'
	// tiers. A member that does not park reads a parked set's records
	// again as new ones.
	Agreed, Withdrawn func() bool
	// LogStart, when set, is where a source partition's log starts (ok
	// false: not known), as the consumer last heard it: a parked record
	// below it is gone (Machine.SetLogStart).
	LogStart func(topic string, partition int32) (start int64, ok bool)
	keyorder.Set[*txn.Record]
}

// keyState is one blocked key (see keyorder.State).
type keyState = keyorder.State

// stateKey identifies a key: source topic, source partition, key bytes.
func stateKey(topic string, partition int32, key []byte) string {
	return keyorder.StateKey(topic, partition, key)
}

func partitionOfStateKey(k string) (int32, bool) {
	p, ok := keyorder.PartOf(k)
	return p.Partition, ok
}

func (k *KeyOrdering) get(sk string) *keyState { return k.Get(sk) }

// put changes a key's state (nil: unblocked) and returns the state record
// that makes the change durable in the open transaction.
func (k *KeyOrdering) put(sk string, partition int32, s *keyState) txn.Output {
	return txn.Output{Topic: k.StateTopic, Partition: partition, Key: []byte(sk), Value: k.Put(sk, s)}
}

// agree pauses parking while the group does not agree on it, and hands
// back what is parked once it has not for long.
func (k *KeyOrdering) agree() {
	if k.Agreed != nil {
		k.Pause(!k.Agreed())
	}
	if k.Withdrawn != nil {
		k.Withhold(k.Withdrawn())
	}
}

func (k *KeyOrdering) commit() { k.Commit() }

// abort undoes what the aborted transaction changed.
func (k *KeyOrdering) abort() { k.Abort() }

// Restore adds the blocked keys among state-topic records (key → value,
// as the machine's LoadState reads them for newly assigned partitions).
// A record of a newer format, or one that cannot be read at all, is an
// error.
func (k *KeyOrdering) Restore(entries map[string][]byte) error {
	if err := k.Set.Restore(entries); err != nil {
		return fmt.Errorf("%s: %w", k.StateTopic, err)
	}
	return nil
}
