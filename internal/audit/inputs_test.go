package audit

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/envelope"
)

// Every topic that holds end states or the ledger must be in the
// metadata: the replay and state topics and the configured tiers as much
// as the output, rejected and quarantine topics (a principal without
// Describe on one, or another RELAY_STATE_TOPIC, read it as empty). Under
// partition ordering no tier is read.
func TestMissingTopics(t *testing.T) {
	cfg := &config.Config{OutputTopic: "{topic}.valid", QuarantineTopic: "{topic}.quarantine", RejectedTopic: "{topic}.rejected",
		ReplayTopic: "{topic}.replay", StateTopic: "_relay.{group}.state", GroupID: "relay", RetryTopic: "{topic}.retry.{delay}",
		RetryTiers: []config.Tier{{Delay: 30 * time.Second, Label: "30s"}}, Ordering: "key"}
	all := []string{"orders.valid", "orders.quarantine", "orders.rejected", "orders.replay", "_relay.relay.state", "orders.retry.30s"}
	md := func(names ...string) *kafka.Metadata {
		m := &kafka.Metadata{Topics: map[string]kafka.TopicMetadata{}}
		for _, n := range names {
			m.Topics[n] = kafka.TopicMetadata{Topic: n, Partitions: []kafka.PartitionMetadata{{ID: 0}}}
		}
		return m
	}
	if got := missingTopics(cfg, "orders", md(all...)); len(got) != 0 {
		t.Fatalf("all there: missing %v", got)
	}
	for _, gone := range all {
		rest := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == gone })
		if got := missingTopics(cfg, "orders", md(rest...)); !slices.Equal(got, []string{gone}) {
			t.Errorf("without %s: missing %v", gone, got)
		}
	}
	cfg.Ordering = "partition"
	if got := missingTopics(cfg, "orders", md(all[:5]...)); len(got) != 0 {
		t.Errorf("partition ordering without tier topics: missing %v", got)
	}
}

// A group that has committed no offset of any partition of the window is
// no verdict: every record would count as not consumed.
func TestGroupThatCommittedNothing(t *testing.T) {
	s := testScan(t, nil)
	s.cfg.GroupID = "relay"
	s.parts[0].committed = -1
	if err := s.groupCommitted(); err == nil || !strings.Contains(err.Error(), "RELAY_GROUP_ID") {
		t.Fatalf("nothing committed: %v", err)
	}
	// A window without records (a source written to by nobody yet, as
	// helm test right after an install) has nothing to judge; one record
	// in it makes the group's silence no verdict again.
	for _, pt := range s.parts {
		pt.lo, pt.hi = 7, 7
	}
	if err := s.groupCommitted(); err != nil {
		t.Fatalf("empty window: %v", err)
	}
	s.parts[0].hi = 8
	if err := s.groupCommitted(); err == nil {
		t.Fatal("a record in the window and nothing committed: a verdict")
	}
	s.parts[1] = &part{p: 1, committed: 4}
	if err := s.groupCommitted(); err != nil {
		t.Fatalf("one partition committed: %v", err)
	}
}

// A tier copy due further ahead than relay ever makes one wait (a clock
// far ahead, a record not relay's) is stuck, not in flight for ever; one
// due within a tier's delay is in flight.
func TestCopyDueFarAheadIsStuck(t *testing.T) {
	s := testScan(t, nil)
	s.cfg.RetryTiers = []config.Tier{{Delay: 5 * time.Second, Label: "5s"}}
	env := func(off int64, due time.Time) []kafka.Header {
		return []kafka.Header{h(envelope.FailureID, fmt.Sprintf("orders/0/%d", off)), h(envelope.SourceTopic, "orders"), h(envelope.SourcePartition, "0"),
			h(envelope.SourceOffset, fmt.Sprint(off)), printOf(off), h(envelope.NotBefore, due.UTC().Format(envelope.TimeFormat))}
	}
	tier := s.envelopeRecord(derived{"orders.retry.5s", roleTier})
	tier(msg("orders.retry.5s", 3, nil, nil, env(4, s.o.Now.Add(5*time.Second))...))
	tier(msg("orders.retry.5s", 4, nil, nil, env(6, time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))...))
	if s.rep.Totals[KindStuck] != 1 || !findingAt(s.rep, KindStuck, "orders/0/6", "orders.retry.5s/0/4") {
		t.Fatalf("stuck %d, findings %v; want the copy due in 2100", s.rep.Totals[KindStuck], s.rep.Findings)
	}
}

// A source record timestamped ahead of the audit's clock makes the
// derived topics be read whole: relay's copies of it carry earlier times.
func TestSourceTimestampAheadReadsDerivedWhole(t *testing.T) {
	s := testScan(t, nil)
	if s.aheadTs {
		t.Fatal("ahead before any record ahead")
	}
	m := msg("orders", 5, []byte("k"), value(5))
	m.Timestamp = s.o.Now.Add(72 * time.Hour)
	s.sourceRecord(m)
	starts, err := s.derivedStarts()
	if !s.aheadTs || err != nil || len(starts) != 0 {
		t.Fatalf("ahead %v, starts %v, %v; want the derived topics read whole", s.aheadTs, starts, err)
	}
}
