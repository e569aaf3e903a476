package topics

import (
	"fmt"
	"testing"

	"relay/internal/config"
)

func testConfig(t *testing.T, vars map[string]string) *config.Config {
	t.Helper()
	m := map[string]string{"RELAY_SOURCE_TOPICS": "orders,pay", "RELAY_TRANSACTIONAL_ID": "relay-0", "RELAY_KAFKA_BOOTSTRAP_SERVERS": "x:9092"}
	for k, v := range vars {
		m[k] = v
	}
	var environ []string
	for k, v := range m {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := m[k]; return v, ok }, environ)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Tier topics of an earlier configuration are found by the tier template
// with any delay; the topics relay uses now, other sources' tiers and
// names that only look alike are not.
func TestRetiredTiers(t *testing.T) {
	cfg := testConfig(t, map[string]string{"RELAY_RETRY_TIERS": "2s"})
	names := []string{"orders", "orders.valid", "orders.retry.2s", "orders.retry.30s", "orders.retry.5m", "orders.retry.soon",
		"orders.retry.30s.bak", "pay.retry.1h", "orders.quarantine", "_relay.relay.state"}
	var found []string
	for _, c := range RetiredTiers(cfg, "orders", names) {
		found = append(found, c.Topic+"="+c.Delay.String())
	}
	if got, want := fmt.Sprint(found), "[orders.retry.30s=30s orders.retry.5m=5m0s]"; got != want {
		t.Fatalf("candidates %s, want %s", got, want)
	}
	// Partition ordering has no tiers: the one a template without
	// {delay} names is retired too.
	cfg = testConfig(t, map[string]string{"RELAY_ORDERING": "partition", "RELAY_RETRY_TOPIC": "{topic}.retry", "RELAY_RETRY_TIERS": "5s"})
	if got := RetiredTiers(cfg, "orders", []string{"orders.retry", "orders.retry.5s"}); len(got) != 1 || got[0].Topic != "orders.retry" {
		t.Fatalf("candidates %v, want [orders.retry]", got)
	}
}
