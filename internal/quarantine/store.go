package main

import (
	"context"
	"fmt"
	"os"
	"os/user"
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

// failure is one quarantined failure as the operator commands see it: its
// ledger entry and its latest quarantine record, either of which may be
// missing (a record quarantined before the ledger existed has no entry; a
// record past its topic's retention is gone).
type failure struct {
	ID            string
	State         string
	Code          string
	Since         time.Time
	Source        ledger.Source
	SchemaVersion int
	ReplayCount   int
	Entry         *ledger.Entry
	Record        *quarantined
}

// quarantined is a record of a quarantine topic.
type quarantined struct {
	F         *envelope.Failure
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

// snapshot is what operator commands act on: every failure of the
// configured sources, and the retention of each quarantine topic.
type snapshot struct {
	failures  []*failure
	byID      map[string]*failure
	retention map[string]time.Duration
	// kept says the snapshot keeps the bytes of some records (and a
	// record without them was not asked for).
	kept bool
	// stateEnds are the state topic's high watermarks before it was
	// read: a replay follows the ledger from there.
	stateEnds map[int32]int64
}

// readBound bounds each read of a topic to its end: it covers an open
// transaction of a dead instance (transaction.timeout.ms) and a large
// quarantine.
const readBound = 10 * time.Minute

// loadSnapshot reads the state topic and every quarantine topic to their
// ends (committed records only) and joins them by failure id. Memory holds
// the metadata of every failure, but the value and headers only of the
// records keep asks for (nil: none), so a large quarantine can be listed.
func loadSnapshot(ctx context.Context, cfg *config.Config, a *kafka.AdminClient, keep func(id string) bool) (*snapshot, error) {
	timeout := max(cfg.OpTimeout, 10*time.Second)
	stateTopic := cfg.StateTopicName()
	n, err := topics.Partitions(a, stateTopic, timeout)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("state topic %s does not exist (relay topics apply creates it)", stateTopic)
	}
	s := &snapshot{byID: map[string]*failure{}, retention: map[string]time.Duration{}, kept: keep != nil}
	var events []*ledger.Event
	var bad error
	s.stateEnds, err = statetopic.ReadToEnd(ctx, cfg, "relay-cli", stateTopic, statetopic.Partitions(n), readBound, func(m *kafka.Message) {
		e, ok, err := ledger.Decode(string(m.Key), m.Value)
		if err != nil && bad == nil {
			bad = err
		}
		if ok && e != nil {
			events = append(events, e)
		}
	})
	if err != nil {
		return nil, err
	}
	if bad != nil {
		fmt.Fprintf(os.Stderr, "warning: %v\n", bad)
	}
	for id, en := range ledger.Fold(events) {
		s.byID[id] = &failure{ID: id, State: en.State, Code: en.Code, Since: en.Since, Source: en.Source,
			SchemaVersion: en.SchemaVersion, ReplayCount: en.ReplayCount, Entry: en}
	}
	for _, src := range cfg.SourceTopics {
		topic := cfg.Derived(src).Quarantine
		n, err := topics.Partitions(a, topic, timeout)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			continue
		}
		c, cancel := context.WithTimeout(ctx, timeout)
		if r, ok, err := topics.Retention(c, a, topic); err == nil && ok {
			s.retention[topic] = r
		}
		cancel()
		_, err = statetopic.ReadToEnd(ctx, cfg, "relay-cli", topic, statetopic.Partitions(n), readBound, func(m *kafka.Message) {
			hs := toHeaders(m.Headers)
			f, err := envelope.Parse(hs)
			if err != nil && f == nil {
				return // not relay's
			}
			q := &quarantined{F: f, Topic: topic, Partition: m.TopicPartition.Partition, Offset: int64(m.TopicPartition.Offset),
				Key: m.Key, ValueLen: len(m.Value), Timestamp: m.Timestamp, Damaged: err}
			if keep != nil && keep(f.ID) {
				q.Value, q.Headers, q.Kept = m.Value, m.Headers, true
			}
			if q.F.SourceTopic == "" {
				q.F.SourceTopic = src
			}
			fl := s.byID[f.ID]
			if fl == nil {
				// Quarantined before the ledger existed: open.
				fl = &failure{ID: f.ID, State: ledger.Open, Code: f.Code, Since: f.LastFailedAt, SchemaVersion: f.SchemaVersion,
					Source: ledger.SourceOf(f)}
				s.byID[f.ID] = fl
			}
			fl.Record = q // the latest one wins
			fl.ReplayCount = max(fl.ReplayCount, f.ReplayCount)
			if fl.SchemaVersion == 0 {
				fl.SchemaVersion = f.SchemaVersion
			}
		})
		if err != nil {
			return nil, err
		}
	}
	for _, f := range s.byID {
		s.failures = append(s.failures, f)
	}
	sort.Slice(s.failures, func(i, j int) bool {
		a, b := s.failures[i], s.failures[j]
		if !a.Since.Equal(b.Since) {
			return a.Since.Before(b.Since)
		}
		return a.ID < b.ID
	})
	return s, nil
}

// summary summarises the snapshot as the gauges do.
func (s *snapshot) summary() ledger.Summary {
	items := make([]ledger.Item, 0, len(s.failures))
	for _, f := range s.failures {
		it := ledger.Item{State: f.State, Code: f.Code, Since: f.Since}
		if f.Record != nil {
			it.Topic, it.RecordTime = f.Record.Topic, f.Record.Timestamp
		}
		items = append(items, it)
	}
	return ledger.Summarize(items, func(t string) (time.Duration, bool) {
		r, ok := s.retention[t]
		return r, ok
	})
}

// actorOf is who an operator command records: --actor, else RELAY_ACTOR,
// else user@host.
func actorOf(flag string, lookup func(string) (string, bool)) string {
	if flag != "" {
		return flag
	}
	if v, ok := lookup(config.EnvActor); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v)
	}
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	if host == "" {
		return name
	}
	return name + "@" + host
}

// age renders a duration for tables: whole seconds, minutes, hours, days.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + age(-d)
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
