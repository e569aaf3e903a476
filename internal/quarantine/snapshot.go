package quarantine

import (
	"context"
	"fmt"
	"hash/maphash"
	"sort"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/statetopic"
	"relay/internal/topics"
)

// Failure is one quarantined failure as the operator commands see it: its
// ledger entry and its latest quarantine record, either of which may be
// missing (a record quarantined before the ledger existed has no entry; a
// record past its topic's retention is gone).
type Failure struct {
	ID            string
	State         ledger.State
	Code          string
	Since         time.Time
	Source        ledger.Source
	SchemaVersion int
	ReplayCount   int
	// ReplayID is the replay of the change that decides the state, and
	// ChangedAt when it was made (zero outside the ledger).
	ReplayID  string
	ChangedAt time.Time
	// Entry is the ledger's history; an Index holds none (Reader.Full
	// reads it).
	Entry  *ledger.Entry
	Record *Record
	// keyHash is the record key's hash under seed, when the failure comes
	// from an Index (which keeps no keys).
	keyHash uint64
	seed    *maphash.Seed
}

// Record is a record of a quarantine topic.
type Record struct {
	Failure   *envelope.Failure // its envelope
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	ValueLen  int
	Timestamp time.Time
	// Value and Headers are there only when the snapshot was asked to
	// keep them (Kept).
	Value   []byte
	Headers []kafka.Header
	Kept    bool
	// Damaged says why its envelope cannot be read whole; such a record is
	// listed but not replayed.
	Damaged error
}

// Snapshot is what a replay acts on: every failure of the
// configured sources, and the retention of each quarantine topic.
type Snapshot struct {
	// Failures are oldest first (then by id).
	Failures  []*Failure
	ByID      map[string]*Failure
	Retention map[string]time.Duration
	// Kept says the snapshot keeps the bytes of some records (and a
	// record without them was not asked for).
	Kept bool
	// StateEnds are the state topic's high watermarks before it was
	// read: a replay follows the ledger from there.
	StateEnds map[int32]int64
	// Warning is the first ledger record that could not be read, if any;
	// the rest of the ledger was read.
	Warning error
}

// readBound bounds each read of a topic to its end: it covers an open
// transaction of a dead instance (transaction.timeout.ms) and a large
// quarantine.
const readBound = 10 * time.Minute

// readerRole names the operator commands' readers (config.ReaderGroup).
const readerRole = "cli"

// Load reads the state topic and every quarantine topic to their ends
// (committed records only) and joins them by failure id. With keep nil,
// memory holds the metadata of every failure (about 3.5 KiB each) and no
// record's bytes; with keep, only the failures keep selects, with their
// records' value and headers (a replay's selection, chosen on an Index).
func Load(ctx context.Context, cfg *config.Config, a topics.Admin, keep func(id string) bool) (*Snapshot, error) {
	s := &Snapshot{ByID: map[string]*Failure{}, Retention: map[string]time.Duration{}, Kept: keep != nil}
	if err := s.readLedger(ctx, cfg, a, keep); err != nil {
		return nil, err
	}
	for _, src := range cfg.SourceTopics {
		if err := s.readQuarantine(ctx, cfg, a, src, keep); err != nil {
			return nil, err
		}
	}
	for _, f := range s.ByID {
		s.Failures = append(s.Failures, f)
	}
	sort.Slice(s.Failures, func(i, j int) bool {
		a, b := s.Failures[i], s.Failures[j]
		if !a.Since.Equal(b.Since) {
			return a.Since.Before(b.Since)
		}
		return a.ID < b.ID
	})
	return s, nil
}

// ledgerID is the failure id in a ledger record's key
// (q|<id>|<replay count>|<kind>); "" for other keys.
func ledgerID(key string) string {
	rest, ok := strings.CutPrefix(key, ledger.Prefix)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "|")
	return id
}

func opTimeout(cfg *config.Config) time.Duration { return max(cfg.OpTimeout, 10*time.Second) }

// readLedger folds the state topic's ledger records into failures.
func (s *Snapshot) readLedger(ctx context.Context, cfg *config.Config, a topics.Admin, keep func(id string) bool) error {
	stateTopic := cfg.StateTopicName()
	n, err := topics.Partitions(a, stateTopic, opTimeout(cfg))
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("state topic %s does not exist (relay topics apply creates it)", stateTopic)
	}
	var events []*ledger.Event
	s.StateEnds, err = statetopic.ReadToEnd(ctx, cfg, cfg.ReaderGroup(readerRole), stateTopic, statetopic.Partitions(n), readBound, func(m *kafka.Message) {
		if keep != nil && !keep(ledgerID(string(m.Key))) {
			return
		}
		e, ok, err := ledger.Decode(string(m.Key), m.Value)
		if err != nil && s.Warning == nil {
			s.Warning = err
		}
		if ok && e != nil && (keep == nil || keep(e.ID)) {
			events = append(events, e)
		}
	})
	if err != nil {
		return err
	}
	s.fold(events)
	return nil
}

// fold makes the failures of the ledger's changes.
func (s *Snapshot) fold(events []*ledger.Event) {
	for id, en := range ledger.Fold(events) {
		cur := en.Current()
		s.ByID[id] = &Failure{ID: id, State: en.State, Code: en.Code, Since: en.Since, Source: en.Source,
			SchemaVersion: en.SchemaVersion, ReplayCount: en.ReplayCount, ReplayID: cur.ReplayID, ChangedAt: cur.At, Entry: en}
	}
}

// readQuarantine joins the records of src's quarantine topic to their
// failures, and notes the topic's retention.
func (s *Snapshot) readQuarantine(ctx context.Context, cfg *config.Config, a topics.Admin, src string, keep func(id string) bool) error {
	timeout := opTimeout(cfg)
	topic := cfg.Derived(src).Quarantine
	n, err := topics.Partitions(a, topic, timeout)
	if err != nil || n == 0 {
		return err
	}
	c, cancel := context.WithTimeout(ctx, timeout)
	if r, ok, err := topics.Retention(c, a, topic); err == nil && ok {
		s.Retention[topic] = r
	}
	cancel()
	_, err = statetopic.ReadToEnd(ctx, cfg, cfg.ReaderGroup(readerRole), topic, statetopic.Partitions(n), readBound, func(m *kafka.Message) {
		s.add(m, topic, src, keep)
	})
	return err
}

// add joins one quarantine record to its failure; the latest one wins.
func (s *Snapshot) add(m *kafka.Message, topic, src string, keep func(id string) bool) {
	f, err := envelope.Parse(toHeaders(m.Headers))
	if err != nil && f == nil {
		return // not relay's
	}
	if keep != nil && !keep(f.ID) {
		return
	}
	q := &Record{Failure: f, Topic: topic, Partition: m.TopicPartition.Partition, Offset: int64(m.TopicPartition.Offset),
		Key: m.Key, ValueLen: len(m.Value), Timestamp: m.Timestamp, Damaged: err}
	if keep != nil {
		q.Value, q.Headers, q.Kept = m.Value, m.Headers, true
	}
	if q.Failure.SourceTopic == "" {
		q.Failure.SourceTopic = src
	}
	fl := s.ByID[f.ID]
	if fl == nil {
		// Quarantined before the ledger existed: open.
		fl = &Failure{ID: f.ID, State: ledger.Open, Code: f.Code, Since: f.LastFailedAt, SchemaVersion: f.SchemaVersion,
			Source: ledger.SourceOf(f)}
		s.ByID[f.ID] = fl
	}
	fl.Record = q
	fl.ReplayCount = max(fl.ReplayCount, f.ReplayCount)
	if fl.SchemaVersion == 0 {
		fl.SchemaVersion = f.SchemaVersion
	}
}

func toHeaders(hs []kafka.Header) []envelope.Header {
	out := make([]envelope.Header, len(hs))
	for i, h := range hs {
		out[i] = envelope.Header{Key: h.Key, Value: h.Value}
	}
	return out
}
