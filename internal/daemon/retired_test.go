package daemon

import (
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/topics"
)

func retiredConfig(t *testing.T, vars map[string]string) *config.Config {
	t.Helper()
	m := map[string]string{"RELAY_SOURCE_TOPICS": "orders,pay", "RELAY_TRANSACTIONAL_ID": "relay-0", "RELAY_KAFKA_BOOTSTRAP_SERVERS": "x:9092"}
	for k, v := range vars {
		m[k] = v
	}
	lookup, environ := env(m)
	cfg, err := config.Load(lookup, environ)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Tier topics of an earlier configuration are found by the tier template
// with any delay; the topics relay uses now, other sources' tiers and
// names that only look alike are not.
func TestTierCandidates(t *testing.T) {
	cfg := retiredConfig(t, map[string]string{"RELAY_RETRY_TIERS": "2s"})
	used := map[string]bool{"orders": true, "pay": true}
	for _, s := range topics.Plan(cfg, nil) {
		used[s.Name] = true
	}
	names := []string{"orders", "orders.valid", "orders.retry.2s", "orders.retry.30s", "orders.retry.5m", "orders.retry.soon",
		"orders.retry.30s.bak", "pay.retry.1h", "orders.quarantine", "_relay.relay.state"}
	var found []string
	for _, c := range tierCandidates(cfg, "orders", names, used) {
		found = append(found, c.topic+"="+c.delay.String())
	}
	if got, want := fmt.Sprint(found), "[orders.retry.30s=30s orders.retry.5m=5m0s]"; got != want {
		t.Fatalf("candidates %s, want %s", got, want)
	}
	// Partition ordering has no tiers: the one a template without
	// {delay} names is retired too.
	cfg = retiredConfig(t, map[string]string{"RELAY_ORDERING": "partition", "RELAY_RETRY_TOPIC": "{topic}.retry", "RELAY_RETRY_TIERS": "5s"})
	used = map[string]bool{}
	for _, s := range topics.Plan(cfg, nil) {
		used[s.Name] = true
	}
	if got := tierCandidates(cfg, "orders", []string{"orders.retry", "orders.retry.5s"}, used); len(got) != 1 || got[0].topic != "orders.retry" {
		t.Fatalf("candidates %v, want [orders.retry]", got)
	}
}

// A retired tier stands for the configured tier whose delay is the
// longest not above its own, so a record from it goes on to longer waits.
func TestTierFor(t *testing.T) {
	tiers := []config.Tier{{Delay: 2 * time.Second}, {Delay: time.Minute}, {Delay: time.Hour}}
	for _, c := range []struct {
		delay time.Duration
		want  int
	}{{time.Second, 0}, {2 * time.Second, 0}, {30 * time.Second, 0}, {5 * time.Minute, 1}, {2 * time.Hour, 2}, {0, 2}} {
		if got := tierFor(c.delay, tiers); got != c.want {
			t.Errorf("tierFor(%s) = %d, want %d", c.delay, got, c.want)
		}
	}
	if got := tierFor(time.Minute, nil); got != 0 {
		t.Errorf("no tiers: %d", got)
	}
}

// A retired tier's records of another group (groups can share tier topic
// names) are not this group's to wait for.
func TestOtherGroup(t *testing.T) {
	hs := func(g string) []kafka.Header {
		return []kafka.Header{{Key: "app", Value: []byte("x")}, {Key: envelope.ConsumerGroup, Value: []byte(g)}}
	}
	if otherGroup(hs("relay"), "relay") || !otherGroup(hs("billing"), "relay") || otherGroup(nil, "relay") {
		t.Fatal("otherGroup")
	}
}
