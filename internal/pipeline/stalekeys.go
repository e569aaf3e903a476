package pipeline

import (
	"strings"

	"relay/internal/txn"
)

// staleKeys are key states found in the state topic while key ordering is
// off (RELAY_ORDERING changed from key): their records are handled without
// key order now, so the states are deleted, by tombstones written with the
// first transaction that handles a record of their partition. Kept, they
// would come back if key ordering did, and every new record of their keys
// would follow a head handled long ago, from tier to tier, for ever.
type staleKeys struct {
	byPart map[int32][]string
	// sent is what the open transaction deleted, put back by an abort.
	sent map[int32][]string
}

// restore notes the key states among state-topic entries.
func (s *staleKeys) restore(entries map[string][]byte) int {
	n := 0
	for sk, v := range entries {
		p, ok := partitionOfStateKey(sk)
		if !strings.HasPrefix(sk, "key|") || v == nil || !ok {
			continue
		}
		if s.byPart == nil {
			s.byPart = map[int32][]string{}
		}
		s.byPart[p] = append(s.byPart[p], sk)
		n++
	}
	return n
}

// tombstones are the deletions to write with a record of partition p.
func (s *staleKeys) tombstones(topic string, p int32) []txn.Output {
	keys := s.byPart[p]
	if len(keys) == 0 {
		return nil
	}
	out := make([]txn.Output, len(keys))
	for i, sk := range keys {
		out[i] = txn.Output{Topic: topic, Partition: p, Key: []byte(sk)}
	}
	if s.sent == nil {
		s.sent = map[int32][]string{}
	}
	s.sent[p] = keys
	delete(s.byPart, p)
	return out
}

func (s *staleKeys) commit() { clear(s.sent) }

func (s *staleKeys) abort() {
	for p, keys := range s.sent {
		s.byPart[p] = append(s.byPart[p], keys...)
	}
	clear(s.sent)
}

func (s *staleKeys) forget(partitions []int32) {
	for _, p := range partitions {
		delete(s.byPart, p)
		delete(s.sent, p)
	}
}
