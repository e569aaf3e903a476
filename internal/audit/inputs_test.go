package audit

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
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
	s.parts[1] = &part{p: 1, committed: 4}
	if err := s.groupCommitted(); err != nil {
		t.Fatalf("one partition committed: %v", err)
	}
}
