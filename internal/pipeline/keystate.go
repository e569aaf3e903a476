package pipeline

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"relay/internal/txn"
)

// KeyOrdering keeps per-key order (RELAY_ORDERING=key). While a key has a
// record in a retry tier (its head), later records of the key follow it
// into the tier, numbered (relay.key.seq), and each is processed only when
// every earlier one is resolved. Records of other keys are not held back.
//
// The state of every blocked key is durable: each change is a record of the
// compacted state topic, written in the transaction of the record that
// caused it, in the partition of the record's source partition number, and
// restored (Restore, through Machine.OnAssigned) before the partition is
// processed again. Memory holds
// one small entry per blocked key.
type KeyOrdering struct {
	// StateTopic is the compacted state topic.
	StateTopic string
	// Hold quarantines the followers of a quarantined head (KEY_HELD);
	// without it they go on.
	Hold    bool
	keys    map[string]*keyState
	journal map[string]*keyState // state before the open transaction changed it; nil = absent
}

// keyState is one blocked key: the records of the key with seq in
// [Next, Tail) are outstanding, in order; Next may be processed now.
type keyState struct {
	Next      int64     `json:"next"`
	Tail      int64     `json:"tail"`
	Tier      int       `json:"tier"`      // tier of the head's latest hop
	NotBefore time.Time `json:"notBefore"` // the head's due time
	Held      bool      `json:"held,omitempty"`
	Head      string    `json:"head,omitempty"` // failure id of the head, for operators
}

// keyStateVersion is the format of the key states relay writes, their
// field "v". A record without it is version 1, written before records had
// versions; one with a higher version was written by a newer relay and is
// skipped with a warning, not misread: its key is then not held back.
const keyStateVersion = 1

type versioned struct {
	V int `json:"v"`
}

// stateKey identifies a key: source topic, source partition, key bytes.
func stateKey(topic string, partition int32, key []byte) string {
	return "key|" + topic + "|" + strconv.Itoa(int(partition)) + "|" + base64.RawURLEncoding.EncodeToString(key)
}

func partitionOfStateKey(k string) (int32, bool) {
	parts := strings.Split(k, "|")
	if len(parts) != 4 {
		return 0, false
	}
	p, err := strconv.Atoi(parts[2])
	return int32(p), err == nil
}

// Blocked is the number of blocked keys in memory.
func (k *KeyOrdering) Blocked() int { return len(k.keys) }

func (k *KeyOrdering) get(sk string) *keyState {
	if s, ok := k.keys[sk]; ok {
		c := *s
		return &c
	}
	return nil
}

// put changes a key's state (nil: unblocked) and returns the state record
// that makes the change durable in the open transaction.
func (k *KeyOrdering) put(sk string, partition int32, s *keyState) txn.Output {
	if k.keys == nil {
		k.keys = map[string]*keyState{}
	}
	if k.journal == nil {
		k.journal = map[string]*keyState{}
	}
	if _, seen := k.journal[sk]; !seen {
		k.journal[sk] = k.keys[sk] // nil when absent
	}
	out := txn.Output{Topic: k.StateTopic, Partition: partition, Key: []byte(sk)}
	if s == nil {
		delete(k.keys, sk)
		return out // a tombstone: compaction forgets the key
	}
	c := *s
	k.keys[sk] = &c
	out.Value, _ = json.Marshal(struct { // plain structs: cannot fail
		versioned
		*keyState
	}{versioned{keyStateVersion}, &c})
	return out
}

func (k *KeyOrdering) commit() { clear(k.journal) }

// abort undoes what the aborted transaction changed.
func (k *KeyOrdering) abort() {
	for sk, prev := range k.journal {
		if prev == nil {
			delete(k.keys, sk)
		} else {
			k.keys[sk] = prev
		}
	}
	clear(k.journal)
}

// Restore adds the blocked keys among state-topic records (key → value,
// as the machine's LoadState reads them for newly assigned partitions).
// Records of a newer format are skipped and returned, so the caller can
// warn; a record that cannot be read at all is an error.
func (k *KeyOrdering) Restore(entries map[string][]byte) (skipped []error, err error) {
	if k.keys == nil {
		k.keys = map[string]*keyState{}
	}
	for sk, v := range entries {
		if !strings.HasPrefix(sk, "key|") || v == nil {
			continue
		}
		var ver versioned
		if err := json.Unmarshal(v, &ver); err != nil {
			return skipped, fmt.Errorf("state record %q in %s is not readable: %w", sk, k.StateTopic, err)
		}
		if ver.V > keyStateVersion {
			skipped = append(skipped, fmt.Errorf("key state %q in %s has format version %d; this relay reads up to %d (written by a newer relay?): skipped, so the key's records are not held back in order",
				sk, k.StateTopic, ver.V, keyStateVersion))
			continue
		}
		var s keyState
		if err := json.Unmarshal(v, &s); err != nil {
			return skipped, fmt.Errorf("state record %q in %s is not readable: %w", sk, k.StateTopic, err)
		}
		k.keys[sk] = &s
	}
	return skipped, nil
}

// Forget drops the state of revoked partitions: their next owner restores
// it from the state topic.
func (k *KeyOrdering) Forget(partitions []int32) {
	drop := map[int32]bool{}
	for _, p := range partitions {
		drop[p] = true
	}
	for sk := range k.keys {
		if p, ok := partitionOfStateKey(sk); ok && drop[p] {
			delete(k.keys, sk)
		}
	}
}
