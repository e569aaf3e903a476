package config

import (
	"strconv"
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
		c.Derived("orders").Tiers[0]:   "orders.retry.30s",
		c.Derived("orders").Quarantine: "orders.quarantine",
		c.Derived("orders").Rejected:   "orders.rejected",
		c.Derived("orders").Replay:     "orders.replay",
		c.StateTopicName():             "_relay.relay.state",
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
		// A graceful stop that cannot fit its bound is given up (exit 1).
		{with(map[string]string{EnvShutdownTimeout: "9s"}), EnvShutdownTimeout, "shorter than a graceful stop can take"},
		{with(map[string]string{EnvHookURL: "http://hook:8080/x", EnvHookTimeout: "10s", EnvShutdownTimeout: "30s"}), EnvShutdownTimeout, "in-place retries"},
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
		// A transaction timeout the user sets must hold the blocking
		// retry: 100ms + 3×(1s+2s) + 2×200ms + 5s = 14.5s > 10s.
		{merge(reg, map[string]string{EnvHookURL: "http://hook:8080/x", EnvTransactionTimeout: "10000"}), EnvTransactionTimeout, "too short for the blocking retry"},
		// 100ms + 11×(1s+30s) + 10×200ms + 5s = 348.1s: past
		// max.poll.interval.ms, whatever the transaction timeout.
		{merge(reg, map[string]string{EnvHookURL: "http://hook:8080/x", EnvHookTimeout: "30s", EnvBlockingAttempts: "10"}), EnvBlockingAttempts, "does not fit max.poll.interval.ms"},
		// With max.poll.interval.ms raised, the derived timeout stops at
		// the broker's default transaction.max.timeout.ms (15m).
		{merge(reg, map[string]string{EnvHookURL: "http://hook:8080/x", EnvHookTimeout: "90s", EnvBlockingAttempts: "10", "RELAY_KAFKA_MAX_POLL_INTERVAL_MS": "3600000"}), EnvBlockingAttempts, "derives up to 15m0s"},
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

// TestDerivedTransactionTimeout: unset, transaction.timeout.ms is the
// budget plus 30s in whole seconds, below the session timeout (45s) with
// the defaults, registry and hook included; set, it is the user's.
func TestDerivedTransactionTimeout(t *testing.T) {
	reg := map[string]string{EnvSchemaRegistryURL: "http://r:8081", EnvSchemaSubject: "s", EnvSchemaAccept: "1", EnvHookURL: "http://hook:8080/x"}
	for _, tc := range []struct {
		extra map[string]string
		want  time.Duration
	}{
		// No registry, no hook: 100ms + 2×200ms + 5s = 5.5s, + 30s → 36s.
		{nil, 36 * time.Second},
		// A registry and a hook, records at once: 2×100ms + 3×(1s+2s) +
		// 2×200ms + 5s = 14.6s, + 30s → 45s.
		{reg, 45 * time.Second},
		// Under the batch protocol: 2×100ms + 3×(1s+2×2s) + 2×200ms + 5s
		// = 20.6s, + 30s → 51s.
		{map[string]string{EnvHookBatch: "8"}, 51 * time.Second},
		// One record at a time: 100ms + 11×(1s+2s) + 10×200ms + 5s =
		// 40.1s, + 30s → 71s.
		{map[string]string{EnvBlockingAttempts: "10", EnvHookConcurrency: "1"}, 71 * time.Second},
		// Records at once: a batch can run a commit interval past the
		// transaction's: 2×100ms + 11×(1s+2s) + 10×200ms + 5s = 40.2s,
		// + 30s → 71s; under the batch protocol a call can also wait
		// for a request in flight: 2×100ms + 11×(1s+2×2s) + 10×200ms +
		// 5s = 62.2s, + 30s → 93s.
		{map[string]string{EnvBlockingAttempts: "10"}, 71 * time.Second},
		{map[string]string{EnvBlockingAttempts: "10", EnvHookBatch: "8"}, 93 * time.Second},
		{map[string]string{EnvTransactionTimeout: "20000", EnvHookConcurrency: "1"}, 20 * time.Second},
		// A delivery or socket timeout set for the producer fits in it,
		// as librdkafka requires.
		{map[string]string{"RELAY_KAFKA_SOCKET_TIMEOUT_MS": "60000"}, time.Minute},
		{map[string]string{"RELAY_KAFKA_DELIVERY_TIMEOUT_MS": "50500"}, 51 * time.Second},
		{map[string]string{"RELAY_KAFKA_MESSAGE_TIMEOUT_MS": "120000"}, 2 * time.Minute},
		{map[string]string{"RELAY_KAFKA_MESSAGE_TIMEOUT_MS": "10000"}, 45 * time.Second},
	} {
		env := with(reg)
		if tc.extra == nil {
			env = with(nil)
		}
		for k, v := range tc.extra {
			env[k] = v
		}
		c, err := load(t, env)
		if err != nil {
			t.Errorf("%v: %v", tc.extra, err)
			continue
		}
		if c.TransactionTimeout != tc.want || c.Kafka["transaction.timeout.ms"] != strconv.FormatInt(tc.want.Milliseconds(), 10) {
			t.Errorf("%v: transaction timeout %s (%s ms), want %s", tc.extra, c.TransactionTimeout, c.Kafka["transaction.timeout.ms"], tc.want)
		}
	}
}

// TestFitBrokerTransactionMax: a broker that allows less than relay derived
// gets its limit when the budget fits in it; a value the user set is never
// changed, and one the broker would refuse is an error naming it.
func TestFitBrokerTransactionMax(t *testing.T) {
	c, err := load(t, minimal)
	if err != nil {
		t.Fatal(err)
	}
	if lowered, err := c.FitBrokerTransactionMax(15 * time.Minute); lowered || err != nil {
		t.Errorf("within the limit: lowered %v, %v", lowered, err)
	}
	if lowered, err := c.FitBrokerTransactionMax(30 * time.Second); !lowered || err != nil || c.TransactionTimeout != 30*time.Second || c.Kafka["transaction.timeout.ms"] != "30000" {
		t.Errorf("derived, broker allows 30s: lowered %v, %v, timeout %s (%s)", lowered, err, c.TransactionTimeout, c.Kafka["transaction.timeout.ms"])
	}
	c, _ = load(t, minimal)
	if _, err := c.FitBrokerTransactionMax(5 * time.Second); err == nil || !strings.Contains(err.Error(), EnvBlockingAttempts+":") {
		t.Errorf("derived, budget 5.5s over a 5s broker limit: %v", err)
	}
	c, _ = load(t, with(map[string]string{EnvTransactionTimeout: "120000"}))
	if _, err := c.FitBrokerTransactionMax(time.Minute); err == nil || !strings.Contains(err.Error(), EnvTransactionTimeout+":") || c.TransactionTimeout != 2*time.Minute {
		t.Errorf("set by the user over the broker's limit: %v, timeout %s", err, c.TransactionTimeout)
	}
}

func TestEffectiveMasksRegistrySecrets(t *testing.T) {
	c, err := load(t, with(map[string]string{
		EnvSchemaRegistryURL: "https://user:pa55@registry:8081", EnvSchemaSubject: "s", EnvSchemaAccept: "1",
		EnvSchemaRegistrySecret: "t0ken", EnvHookURL: "https://hook.example/check?code=hook-k3y",
	}))
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Join(c.Effective(), "\n")
	if strings.Contains(out, "pa55") || strings.Contains(out, "t0ken") || !strings.Contains(out, EnvRetryTiers+"=30s,5m") ||
		strings.Contains(out, "hook-k3y") || !strings.Contains(out, EnvHookURL+"=https://hook.example/check?code=%2A%2A%2A%2A") {
		t.Fatalf("effective config:\n%s", out)
	}
}

// TestDefaultsFitEveryFeatureCombination: with only the required variables
// and the settings each optional feature needs, every combination of
// registry, rules, hook and ordering policy must load with the defaults.
func TestDefaultsFitEveryFeatureCombination(t *testing.T) {
	features := []struct {
		name string
		env  map[string]string
	}{
		{"plain", nil},
		{"registry", map[string]string{EnvSchemaRegistryURL: "http://r:8081/apis/ccompat/v7", EnvSchemaSubject: "orders-value", EnvSchemaAccept: "2-3"}},
		{"registry+rules", map[string]string{EnvSchemaRegistryURL: "http://r:8081", EnvSchemaSubject: "s", EnvSchemaAccept: "1", EnvRulesFile: "/etc/relay/rules.yaml"}},
		{"registry+hook", map[string]string{EnvSchemaRegistryURL: "http://r:8081", EnvSchemaSubject: "s", EnvSchemaAccept: "1", EnvHookURL: "http://hook:8080/x"}},
		{"registry+rules+hook", map[string]string{EnvSchemaRegistryURL: "http://r:8081", EnvSchemaSubject: "s", EnvSchemaAccept: "1", EnvRulesFile: "/etc/relay/rules.yaml", EnvHookURL: "http://hook:8080/x"}},
	}
	for _, f := range features {
		for _, ordering := range []string{"key", "partition", "unordered"} {
			for _, onQuarantine := range []string{"release", "hold"} {
				name := f.name + "/" + ordering + "/" + onQuarantine
				env := with(f.env)
				env[EnvOrdering] = ordering
				env[EnvOrderingOnQuarantine] = onQuarantine
				c, err := load(t, env)
				if err != nil {
					t.Errorf("%s: defaults refused:\n%v", name, err)
					continue
				}
				// The transaction must hold the longest in-place retry and
				// still ride out a broker restart of about 15s.
				need := c.CommitInterval + c.InPlaceBound() + c.OpTimeout
				if c.TransactionTimeout < need+15*time.Second || c.TransactionTimeout > brokerMaxTransactionTimeout {
					t.Errorf("%s: transaction.timeout.ms %s for a budget of %s", name, c.TransactionTimeout, need)
				}
				if c.ShutdownTimeout < c.ShutdownNeed() {
					t.Errorf("%s: a graceful stop can take %s, the bound is %s", name, c.ShutdownNeed(), c.ShutdownTimeout)
				}
			}
		}
	}
}

func TestTraceURLNeedsItsPlaceholder(t *testing.T) {
	for raw, ok := range map[string]bool{"https://jaeger.example/trace/{traceId}": true, "https://jaeger.example/trace/": false, "jaeger/{traceId}": false} {
		_, err := load(t, with(map[string]string{EnvTraceURL: raw}))
		if (err == nil) != ok || (err != nil && !strings.Contains(err.Error(), EnvTraceURL)) {
			t.Errorf("%q: err %v", raw, err)
		}
	}
}
