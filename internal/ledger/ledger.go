// Package ledger is the quarantine ledger: the state of every failure id
// that reached quarantine — open, replaying, resolved, failed-again or
// discarded — with who changed it, why and when.
//
// The ledger lives in the compacted state topic, next to key ordering's
// blocked keys. Every change is one record (an Event) with a key of its own,
// q|<failure id>|<replay count>|<kind>, in the partition of the failure's
// source partition, so compaction keeps the whole history of a failure and
// one partition holds all of it. Each change is written in the transaction
// of what caused it: the quarantine record (open, failed-again), the replay
// record (replaying), the output or rejected record (resolved), or the
// operator's discard.
//
// A failure's current state is the change with the highest (replay count,
// rank) — see Fold — so the history reads the same whatever order
// compaction leaves the records in; a discard stands unless a replay of the
// failure was output (discardedIn).
package ledger

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"relay/internal/envelope"
)

// Prefix starts the key of every ledger record in the state topic.
const Prefix = "q|"

// Source is where the failure first appeared.
type Source struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// SourceOf is where the failure of envelope f first appeared.
func SourceOf(f *envelope.Failure) Source {
	return Source{Topic: f.SourceTopic, Partition: f.SourcePartition, Offset: f.SourceOffset}
}

// Event is one change of a failure's state.
type Event struct {
	ID     string    `json:"failureId"`
	State  State     `json:"state"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Reason string    `json:"reason"`
	// Code is the error code the record was quarantined with (open,
	// failed-again) or the code it had when replayed.
	Code    string `json:"errorCode,omitempty"`
	Attempt int    `json:"attempt,omitempty"` // attempts of the pass that ended here
	// FirstFailedAt is when the pass that ended here first failed.
	FirstFailedAt time.Time `json:"firstFailedAt,omitzero"`
	ReplayID      string    `json:"replayId,omitempty"`
	ReplayCount   int       `json:"replayCount"`
	Source        Source    `json:"source"`
	SchemaVersion int       `json:"schemaVersion,omitempty"`
	// Topic is the quarantine topic holding the record (open,
	// failed-again), and RecordTime the timestamp of that record: the
	// topic's retention counts from it.
	Topic      string    `json:"quarantineTopic,omitempty"`
	RecordTime time.Time `json:"recordTimestamp,omitzero"`
	// Outcome says how a replay ended: processed or rejected (resolved),
	// or duplicate when relay recognised a replay of a failure that was
	// already settled and wrote nothing else for it.
	Outcome Outcome `json:"outcome,omitempty"`
}

// Key is the state-topic key of e: one per failure, replay count and kind
// of change, so compaction keeps every change and a rewrite of the same
// change (a retried transaction) replaces itself.
func (e *Event) Key() string {
	kind := string(e.State)
	if e.Outcome == OutcomeDuplicate {
		kind = string(OutcomeDuplicate)
	}
	return Prefix + e.ID + "|" + strconv.Itoa(e.ReplayCount) + "|" + kind
}

// Partition is the state-topic partition of e: its source partition.
func (e *Event) Partition() int32 { return e.Source.Partition }

// FormatVersion is the format of the ledger records relay writes, their
// field "v". A record without it is version 1, written before records had
// versions; one with a higher version was written by a newer relay and is
// skipped, not misread.
const FormatVersion = 1

// versioned is a state-topic record's format version.
type versioned struct {
	V int `json:"v"`
}

// Value encodes e, with the format version.
func (e *Event) Value() []byte {
	b, _ := json.Marshal(struct { // plain structs: cannot fail
		versioned
		*Event
	}{versioned{FormatVersion}, e})
	return b
}

// Decode reads a ledger record; ok is false for keys that are not the
// ledger's (key ordering's records share the topic).
func Decode(key string, value []byte) (e *Event, ok bool, err error) {
	if !strings.HasPrefix(key, Prefix) || value == nil {
		return nil, false, nil
	}
	// One pass reads the version and the change: a record of a newer
	// format is named as such even when its fields do not fit this one.
	v := record{Event: &Event{}}
	err = decodeRecord(value, &v)
	if v.V > FormatVersion {
		return nil, true, fmt.Errorf("ledger record %q has format version %d; this relay reads up to %d (written by a newer relay?): skipped", key, v.V, FormatVersion)
	}
	if err != nil {
		return nil, true, fmt.Errorf("ledger record %q is not readable: %w", key, err)
	}
	e = v.Event
	if e.ID == "" || !slices.Contains(States, e.State) {
		return nil, true, fmt.Errorf("ledger record %q has no failure id or an unknown state %q", key, e.State)
	}
	return e, true, nil
}

// decodeRecord reads value with encoding/json's semantics (names in any
// case, the same conversions and errors) from the implementation of its
// successor: twice as fast, and a console's first read of a large
// quarantine is mostly this step. TestDecodeReadsAsEncodingJSON holds the
// two to the same reading.
func decodeRecord(value []byte, v *record) error { return jsonv1.Unmarshal(value, v) }

// record is a ledger record as it is written: its format version and the
// change.
type record struct {
	versioned
	*Event
}

// Rank orders the changes of one replay count: open, replaying,
// failed-again, discarded, resolved; a duplicate (a copy recognised later)
// last.
//
// A discard outranks failed-again: closing a failure that failed again is
// what discard is for. resolved outranks a discard of the same replay
// count: the two meet only when an operator discarded a failure while relay
// was already taking its replayed record up, and that record was output —
// the ledger must say what the output says. relay drops a replayed record
// whose discard it has read by the record's turn, so for every interleaving
// the fold and the outputs agree: discarded and nothing output, or resolved
// and output once.
func Rank(e *Event) int {
	switch {
	case e.Outcome == OutcomeDuplicate:
		return 6 // says something about a copy, changes nothing
	case e.State == Open:
		return 1
	case e.State == Replaying:
		return 2
	case e.State == FailedAgain:
		return 3
	case e.State == Discarded:
		return 4
	default:
		return 5 // resolved
	}
}

// Before reports whether a happened before b in a failure's life.
func Before(a, b *Event) bool {
	if a.ReplayCount != b.ReplayCount {
		return a.ReplayCount < b.ReplayCount
	}
	if ra, rb := Rank(a), Rank(b); ra != rb {
		return ra < rb
	}
	return a.At.Before(b.At)
}

// Entry is one failure: its current state and its history.
type Entry struct {
	ID      string  `json:"failureId"`
	State   State   `json:"state"`
	Code    string  `json:"errorCode"`
	Source  Source  `json:"source"`
	History []Event `json:"history"`
	// Since is when it was first quarantined; RecordTime and Topic are
	// those of its latest quarantine record.
	Since         time.Time `json:"quarantinedAt"`
	RecordTime    time.Time `json:"recordTimestamp,omitzero"`
	Topic         string    `json:"quarantineTopic,omitempty"`
	SchemaVersion int       `json:"schemaVersion,omitempty"`
	ReplayCount   int       `json:"replayCount"`
}

// Current is the change that decides the state: the last one, duplicates
// aside.
func (en *Entry) Current() *Event {
	for i := len(en.History) - 1; i >= 0; i-- {
		if en.History[i].Outcome != OutcomeDuplicate {
			return &en.History[i]
		}
	}
	return &en.History[len(en.History)-1]
}

// Fold builds the entries of a set of changes, by failure id.
func Fold(events []*Event) map[string]*Entry {
	byID := map[string][]*Event{}
	for _, e := range events {
		byID[e.ID] = append(byID[e.ID], e)
	}
	out := make(map[string]*Entry, len(byID))
	for id, es := range byID {
		slices.SortStableFunc(es, func(a, b *Event) int {
			switch {
			case Before(a, b):
				return -1
			case Before(b, a):
				return 1
			}
			return 0
		})
		en := &Entry{ID: id}
		for _, e := range es {
			en.History = append(en.History, *e)
			if e.Source.Topic != "" {
				en.Source = e.Source
			}
			if e.Topic != "" {
				en.Topic, en.RecordTime = e.Topic, e.RecordTime
				if e.Code != "" {
					en.Code = e.Code
				}
				if e.SchemaVersion != 0 {
					en.SchemaVersion = e.SchemaVersion
				}
			}
			if en.Since.IsZero() && (e.State == Open || e.State == FailedAgain) {
				en.Since = e.At
			}
			en.ReplayCount = max(en.ReplayCount, e.ReplayCount)
		}
		cur := en.Current()
		en.State = cur.State
		if last := &en.History[len(en.History)-1]; last.Outcome == OutcomeDuplicate && cur.State == Replaying && last.ReplayCount >= cur.ReplayCount {
			// The replay's record was a copy of a failure settled
			// already: relay said so, and it is settled as that.
			en.State = last.State
		}
		if en.State != Resolved && discardedIn(es) {
			en.State = Discarded // see discardedIn
		}
		if en.Code == "" {
			en.Code = cur.Code
		}
		if en.Since.IsZero() {
			en.Since = es[0].At
		}
		out[id] = en
	}
	return out
}

// discardedIn reports whether an operator discarded the failure. A discard
// is final but for an output: a later replay count exists only when a
// replay raced the discard, and unless relay output that replay (resolved),
// the failure stays discarded — failed again or still in flight, nothing
// of it was output.
func discardedIn(es []*Event) bool {
	for _, e := range es {
		if e.State == Discarded && e.Outcome != OutcomeDuplicate {
			return true
		}
	}
	return false
}
