package keyorder

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// State is one blocked key: its records with seq in [Next, Tail) are
// outstanding, in order, and Next may be processed now. Each is either in
// a tier (copied there behind the head) or parked: kept in memory and
// still in its source partition, which commits no further than it.
type State struct {
	Next      int64     `json:"next"`
	Tail      int64     `json:"tail"`
	Tier      int       `json:"tier"`      // tier of the head's latest hop
	NotBefore time.Time `json:"notBefore"` // the head's due time
	Held      bool      `json:"held,omitempty"`
	Head      string    `json:"head,omitempty"` // failure id of the head, for operators
	// HeadSince is when the head became the head (Unix milliseconds; 0
	// unknown): a parked record has waited behind it since then or since
	// it was parked, whichever is later.
	HeadSince int64 `json:"headSince,omitempty"`
	// Parked are the key's parked records, by ascending seq (and source
	// offset).
	Parked []Slot `json:"parked,omitempty"`
}

// Slot is a parked record: its place in its key's queue, its offset in
// the key's source partition, and when it was parked (Unix milliseconds;
// 0 unknown), which it keeps while it stays parked, across restarts and
// new owners: relay audit tells a follower whose head never settles by it.
type Slot struct {
	Seq    int64 `json:"seq"`
	Offset int64 `json:"offset"`
	At     int64 `json:"at,omitempty"`
	// Lost: the record is gone from its source partition (retention,
	// DeleteRecords, a reset of the group's offset past it) and was never
	// handled. The slot holds its place in the key's queue, which passes
	// over it at its turn; it parks no offset.
	Lost bool `json:"lost,omitempty"`
}

// Format versions of the key states relay writes (their field "v"): a
// state with parked records is version 2, which a relay without parking
// skips (with a warning) instead of misreading; any other is version 1,
// as before. A record without "v" was written before records had
// versions and is version 1.
const (
	stateVersion       = 1
	parkedStateVersion = 2
	readsUpTo          = parkedStateVersion
)

type versioned struct {
	V int `json:"v"`
}

// Part is a source partition.
type Part struct {
	Topic     string
	Partition int32
}

// StateKey identifies a key in the state topic: its source topic, source
// partition and bytes.
func StateKey(topic string, partition int32, key []byte) string {
	return "key|" + topic + "|" + strconv.Itoa(int(partition)) + "|" + b64(key)
}

// PartOf is the source partition of a state key.
func PartOf(sk string) (Part, bool) {
	parts := strings.Split(sk, "|")
	if len(parts) != 4 || parts[0] != "key" {
		return Part{}, false
	}
	p, err := strconv.Atoi(parts[2])
	if err != nil {
		return Part{}, false
	}
	return Part{Topic: parts[1], Partition: int32(p)}, true
}

// Encode is s as a state-topic value.
func (s *State) Encode() []byte {
	v := stateVersion
	if len(s.Parked) > 0 {
		v = parkedStateVersion
	}
	b, _ := json.Marshal(struct { // plain structs: cannot fail
		versioned
		*State
	}{versioned{v}, s})
	return b
}

// DecodeState reads a state-topic value of key sk. newer is a
// *NewerError for a state of a format this relay does not read;
// err is one that cannot be read at all.
func DecodeState(sk string, v []byte) (s *State, newer, err error) {
	var ver versioned
	if err := json.Unmarshal(v, &ver); err != nil {
		return nil, nil, fmt.Errorf("state record %q is not readable: %w", sk, err)
	}
	if ver.V > readsUpTo {
		return nil, &NewerError{What: fmt.Sprintf("key state %q", sk), Version: ver.V, Reads: readsUpTo}, nil
	}
	s = &State{}
	if err := json.Unmarshal(v, s); err != nil {
		return nil, nil, fmt.Errorf("state record %q is not readable: %w", sk, err)
	}
	return s, nil, nil
}

// clone copies s, its parked slots too: a state in the map is never
// changed in place, so a journal entry stays what it was.
func (s *State) clone() *State {
	c := *s
	c.Parked = slices.Clone(s.Parked)
	return &c
}

// Advance resolves the record at the head of a key's queue; nil when
// nothing of the key is outstanding any more.
func Advance(s *State) *State {
	ns := s.clone()
	ns.Next++
	ns.Head, ns.HeadSince = "", 0
	return passLost(ns)
}

// passLost drops the slots before s's turn (a head that was parked,
// handled now) and passes the turn over lost records; nil when nothing of
// the key is outstanding any more.
func passLost(s *State) *State {
	for len(s.Parked) > 0 && (s.Parked[0].Seq < s.Next || s.Parked[0].Seq == s.Next && s.Parked[0].Lost) {
		if s.Parked[0].Seq == s.Next {
			s.Next++
		}
		s.Parked = s.Parked[1:]
	}
	if s.Next >= s.Tail {
		return nil
	}
	return s
}

// Lose is s with its parked record of seq gone from the source: at its
// turn the key goes on to the next record, else the slot is marked lost
// and passed over when its turn comes. nil when nothing of the key is
// outstanding any more.
func Lose(s *State, seq int64) *State {
	ns := s.clone()
	for i := range ns.Parked {
		if ns.Parked[i].Seq == seq {
			ns.Parked[i].Lost = true
		}
	}
	return passLost(ns)
}

// FirstParked is the first slot of s that still parks a record (not
// lost), if any.
func (s *State) FirstParked() (Slot, bool) {
	for _, sl := range s.Parked {
		if !sl.Lost {
			return sl, true
		}
	}
	return Slot{}, false
}

// Waited is how long the parked record sl has waited behind its key's
// current head by now: since it was parked or since the head became the
// head, whichever is later; ok is false when neither is known, or when
// the key has no head now (its head settled and the next record has not
// taken its turn yet: nothing it waits behind can be stuck).
func (s *State) Waited(sl Slot, now time.Time) (d time.Duration, ok bool) {
	since := max(sl.At, s.HeadSince)
	if since <= 0 || s.Head == "" {
		return 0, false
	}
	return now.Sub(time.UnixMilli(since)), true
}

// Unpark is s without the parked slot of seq (a parked record that went
// to a tier: it is outstanding there now).
func Unpark(s *State, seq int64) *State {
	ns := s.clone()
	ns.Parked = slices.DeleteFunc(ns.Parked, func(sl Slot) bool { return sl.Seq == seq })
	return ns
}

// Park is s with one more record, parked at offset at time at: its seq is
// s's tail.
func Park(s *State, offset int64, at time.Time) (ns *State, seq int64) {
	ns = s.clone()
	seq = ns.Tail
	ns.Tail++
	sl := Slot{Seq: seq, Offset: offset}
	if !at.IsZero() {
		sl.At = at.UnixMilli()
	}
	ns.Parked = append(ns.Parked, sl)
	return ns, seq
}
