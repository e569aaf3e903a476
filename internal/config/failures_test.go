package config

import (
	"strings"
	"testing"
	"time"
)

func TestFailureDefaults(t *testing.T) {
	c, err := load(t, minimal)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.RetryTiers) != 2 || c.RetryTiers[0].Delay != 30*time.Second || c.RetryTiers[1].Label != "5m" {
		t.Errorf("tiers %+v", c.RetryTiers)
	}
	for got, want := range map[string]string{
		c.TierTopic("orders", c.RetryTiers[0]): "orders.retry.30s",
		c.Expand(c.QuarantineTopic, "orders"):  "orders.quarantine",
		c.Expand(c.RejectedTopic, "orders"):    "orders.rejected",
		c.Expand(c.ReplayTopic, "orders"):      "orders.replay",
		c.StateTopicName():                     "_relay.relay.state",
	} {
		if got != want {
			t.Errorf("topic %q, want %q", got, want)
		}
	}
	if c.RetryMaxAttempts != 5 || c.RetryMaxElapsed != time.Hour || c.BlockingAttempts != 2 || c.BlockingBackoff != 200*time.Millisecond {
		t.Errorf("budget %+v", c)
	}
}

func TestFailureSettingsRejected(t *testing.T) {
	reg := map[string]string{EnvSchemaRegistryURL: "http://r:8081/apis/ccompat/v7", EnvSchemaSubject: "orders-value", EnvSchemaAccept: "2-3"}
	merge := func(a, b map[string]string) map[string]string {
		out := with(a)
		for k, v := range b {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		env     map[string]string
		wantVar string
		wantMsg string
	}{
		{with(map[string]string{EnvRetryTiers: "30s,oops"}), EnvRetryTiers, "not a duration"},
		{with(map[string]string{EnvRetryTiers: "5m,30s"}), EnvRetryTiers, "must not decrease"},
		{with(map[string]string{EnvRetryTiers: "100ms"}), EnvRetryTiers, "under 1s"},
		{with(map[string]string{EnvRetryMaxAttempts: "0"}), EnvRetryMaxAttempts, "1 to 100"},
		{with(map[string]string{EnvRetryMaxElapsed: "10s"}), EnvRetryMaxElapsed, "shorter than the first tier"},
		{with(map[string]string{EnvOrdering: "key", EnvRetryTiers: ""}), EnvRetryTiers, "key ordering"},
		{with(map[string]string{EnvOrdering: "key", "RELAY_KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "cooperative-sticky"}), "RELAY_KAFKA_PARTITION_ASSIGNMENT_STRATEGY", "range"},
		{with(map[string]string{EnvOrdering: "unordered", "RELAY_KAFKA_PARTITION_ASSIGNMENT_STRATEGY": "roundrobin"}), "RELAY_KAFKA_PARTITION_ASSIGNMENT_STRATEGY", "range"},
		{with(map[string]string{EnvOrderingOnQuarantine: "drop"}), EnvOrderingOnQuarantine, "not one of"},
		{with(map[string]string{EnvOrdering: "partition", EnvRetryTiers: ""}), EnvRetryTiers, "partition ordering waits"},
		{with(map[string]string{EnvOrdering: "random"}), EnvOrdering, "not one of"},
		{with(map[string]string{EnvQuarantineTopic: "dlq"}), EnvQuarantineTopic, "has no {topic}"},
		{with(map[string]string{EnvQuarantineTopic: "{topic}.valid"}), EnvQuarantineTopic, "already the output topic"},
		{with(map[string]string{EnvRetryTopic: "{topic}.retry"}), EnvRetryTopic, "has no {delay}"},
		{with(map[string]string{EnvRulesFile: "/etc/rules.yaml"}), EnvRulesFile, "needs " + EnvSchemaRegistryURL},
		{with(map[string]string{EnvHookURL: "http://hook"}), EnvHookURL, "needs " + EnvSchemaRegistryURL},
		{merge(reg, map[string]string{EnvSchemaAccept: ""}), EnvSchemaAccept, "required"},
		{merge(reg, map[string]string{EnvSchemaAccept: "5-3"}), EnvSchemaAccept, "not a version"},
		{merge(reg, map[string]string{EnvSchemaReaderVersion: "7"}), EnvSchemaReaderVersion, "not among the accepted"},
		{merge(reg, map[string]string{EnvSchemaRegistryURL: "registry:8081"}), EnvSchemaRegistryURL, "not an http(s) URL"},
		{merge(reg, map[string]string{EnvRedactPattern: "(unclosed"}), EnvRedactPattern, "RE2"},
		{merge(reg, map[string]string{EnvCompatHeaders: "spring,jms"}), EnvCompatHeaders, `"jms"`},
		{merge(reg, map[string]string{EnvQuarantineRetention: "24h"}), EnvQuarantineRetention, "shorter than " + EnvQuarantineObjective},
		// The blocking retry must fit the transaction: 100ms + 3×(1s+2s)
		// + 2×200ms + 5s > 10s.
		{merge(reg, map[string]string{EnvHookURL: "http://hook:8080/x"}), EnvBlockingAttempts, "transaction.timeout.ms"},
		{merge(reg, map[string]string{EnvBlockingAttempts: "9"}), EnvBlockingAttempts, "does not fit"},
	}
	for _, tc := range cases {
		_, err := load(t, tc.env)
		if err == nil {
			t.Errorf("%v: accepted", tc.env)
			continue
		}
		if !strings.Contains(err.Error(), tc.wantVar+":") || !strings.Contains(err.Error(), tc.wantMsg) {
			t.Errorf("want %s: ...%s..., got:\n%v", tc.wantVar, tc.wantMsg, err)
		}
	}
	// The same hook fits with a larger transaction timeout.
	c, err := load(t, merge(reg, map[string]string{EnvHookURL: "http://hook:8080/x", EnvTransactionTimeout: "30000"}))
	if err != nil {
		t.Fatalf("hook with a 30s transaction timeout: %v", err)
	}
	if c.SchemaReaderVersion != 3 {
		t.Errorf("reader version defaults to the highest accepted: %d", c.SchemaReaderVersion)
	}
}

func TestEffectiveMasksRegistrySecrets(t *testing.T) {
	c, err := load(t, with(map[string]string{
		EnvSchemaRegistryURL: "https://user:pa55@registry:8081", EnvSchemaSubject: "s", EnvSchemaAccept: "1",
		EnvSchemaRegistrySecret: "t0ken",
	}))
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Join(c.Effective(), "\n")
	if strings.Contains(out, "pa55") || strings.Contains(out, "t0ken") || !strings.Contains(out, EnvRetryTiers+"=30s,5m") {
		t.Fatalf("effective config:\n%s", out)
	}
}
