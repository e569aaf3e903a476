package keyorder

import (
	"encoding/base64"
	"slices"
	"strings"
)

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// Set is the blocked keys of the partitions an instance owns, with their
// parked records. Every change of a key's state is made through Put,
// which journals it: Commit keeps the open transaction's changes, Abort
// undoes them. R is the record type kept for a parked record.
type Set[R any] struct {
	states  map[string]*State
	journal map[string]*State // state before the open transaction changed it; nil = absent
	// slots indexes the parked slots of states by source partition and
	// offset.
	slots map[Part]map[int64]slotRef
	parked[R]
}

type slotRef struct {
	sk  string
	seq int64
}

// Blocked is the number of blocked keys.
func (k *Set[R]) Blocked() int { return len(k.states) }

// Get is a copy of the state of sk, nil when the key is free.
func (k *Set[R]) Get(sk string) *State {
	if s, ok := k.states[sk]; ok {
		return s.clone()
	}
	return nil
}

// Put changes the state of sk (nil: free) in the open transaction and
// returns the state-topic value that makes the change durable (nil: a
// tombstone).
func (k *Set[R]) Put(sk string, s *State) []byte {
	k.init()
	if _, seen := k.journal[sk]; !seen {
		k.journal[sk] = k.states[sk]
	}
	if s == nil {
		k.set(sk, nil)
		return nil
	}
	c := s.clone()
	k.set(sk, c)
	return c.Encode()
}

// set replaces the state of sk (nil: none), keeping the slot index and
// the ready records in step.
func (k *Set[R]) set(sk string, s *State) {
	old := k.states[sk]
	if old != nil {
		k.unindex(sk, old)
	}
	if s == nil {
		delete(k.states, sk)
	} else {
		k.states[sk] = s
		k.index(sk, s, old)
	}
	k.recheck(sk)
}

func (k *Set[R]) init() {
	if k.states == nil {
		k.states = map[string]*State{}
		k.journal = map[string]*State{}
		k.slots = map[Part]map[int64]slotRef{}
	}
	k.parked.init()
}

// index adds the parked slots of s, the new state of sk (old before), to
// the slot index.
func (k *Set[R]) index(sk string, s, old *State) {
	if len(s.Parked) == 0 {
		return
	}
	p, ok := PartOf(sk)
	if !ok {
		return
	}
	m := k.slots[p]
	if m == nil {
		m = map[int64]slotRef{}
		k.slots[p] = m
	}
	for _, sl := range s.Parked {
		if sl.Lost {
			continue
		}
		m[sl.Offset] = slotRef{sk: sk, seq: sl.Seq}
		if _, in := k.mem[p][sl.Offset]; !in && !old.parks(sl.Offset) {
			// Restored, or undone by an abort: its record is to be
			// read again.
			k.gone.stale[p] = true
		}
	}
}

func (k *Set[R]) unindex(sk string, s *State) {
	if len(s.Parked) == 0 {
		return
	}
	p, _ := PartOf(sk)
	m := k.slots[p]
	for _, sl := range s.Parked {
		if r, ok := m[sl.Offset]; ok && r.sk == sk && !sl.Lost {
			delete(m, sl.Offset)
		}
	}
	if len(m) == 0 {
		delete(k.slots, p)
	}
}

// Commit keeps the open transaction's changes.
func (k *Set[R]) Commit() { clear(k.journal) }

// Abort undoes what the aborted transaction changed.
func (k *Set[R]) Abort() {
	for sk, prev := range k.journal {
		k.set(sk, prev)
	}
	clear(k.journal)
}

// Restore adds states read from the state topic (key → value). A state
// of a newer format (a *compat.NewerError) or one that cannot be read at
// all is an error: skipping it would let the key's records past its head.
func (k *Set[R]) Restore(entries map[string][]byte) error {
	k.init()
	for sk, v := range entries {
		if !strings.HasPrefix(sk, "key|") || v == nil {
			continue
		}
		s, newer, err := DecodeState(sk, v)
		if err == nil {
			err = newer
		}
		if err != nil {
			return err
		}
		k.set(sk, s)
	}
	return nil
}

// Forget drops what is known of the given partition numbers (of any
// topic): their next owner restores it.
func (k *Set[R]) Forget(partitions []int32) {
	k.ForgetStates(partitions)
	k.forget(partitions)
}

// ForgetStates drops the key states of the given partition numbers, to be
// restored again (Restore) while the partitions stay: the parked records
// in memory and the committed parked sets being read again stay too.
func (k *Set[R]) ForgetStates(partitions []int32) {
	for sk := range k.states {
		if p, ok := PartOf(sk); ok && slices.Contains(partitions, p.Partition) {
			k.set(sk, nil)
			delete(k.journal, sk)
		}
	}
}

// SlotOf says whether offset of part is a parked record, and its key and
// seq.
func (k *Set[R]) SlotOf(p Part, offset int64) (sk string, seq int64, ok bool) {
	r, ok := k.slots[p][offset]
	return r.sk, r.seq, ok
}

// ParkedOffsets are the parked offsets of p, ascending.
func (k *Set[R]) ParkedOffsets(p Part) []int64 {
	m := k.slots[p]
	out := make([]int64, 0, len(m))
	for o := range m {
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}
