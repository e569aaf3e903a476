package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func load(t *testing.T, m map[string]string) (*Config, error) {
	t.Helper()
	var environ []string
	for k, v := range m {
		environ = append(environ, k+"="+v)
	}
	return Load(func(k string) (string, bool) { v, ok := m[k]; return v, ok }, environ)
}

var minimal = map[string]string{
	EnvSourceTopics:     "orders, payments",
	EnvTransactionalID:  "relay-0",
	EnvBootstrapServers: "127.0.0.1:9092",
}

func with(extra map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range minimal {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestDefaults(t *testing.T) {
	c, err := load(t, minimal)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.SourceTopics, "|"); got != "orders|payments" {
		t.Errorf("SourceTopics = %q", got)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"GroupID", c.GroupID, "relay"},
		{"CommitInterval", c.CommitInterval, 100 * time.Millisecond},
		{"MaxRecordsPerTxn", c.MaxRecordsPerTxn, 5000},
		{"ShutdownTimeout", c.ShutdownTimeout, 30 * time.Second},
		{"OpTimeout", c.OpTimeout, 5 * time.Second},
		{"HTTPAddr", c.HTTPAddr, ":9464"},
		{"output", c.Derived("orders").Output, "orders.valid"},
		{"auto.offset.reset", c.Kafka["auto.offset.reset"], "earliest"},
		{"TransactionTimeout", c.TransactionTimeout, 36 * time.Second},
		{"transaction.timeout.ms", c.Kafka["transaction.timeout.ms"], "36000"},
		{"MaxPollInterval", c.MaxPollInterval, 300 * time.Second},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestPassthroughMapsNames(t *testing.T) {
	c, err := load(t, with(map[string]string{
		"RELAY_KAFKA_SECURITY_PROTOCOL":      "SASL_SSL",
		"RELAY_KAFKA_SASL_MECHANISM":         "PLAIN",
		"RELAY_KAFKA_TRANSACTION_TIMEOUT_MS": "30000",
		"RELAY_KAFKA_AUTO_OFFSET_RESET":      "latest",
	}))
	if err != nil {
		t.Fatal(err)
	}
	for prop, want := range map[string]string{
		"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_SSL",
		"sasl.mechanism": "PLAIN", "auto.offset.reset": "latest",
	} {
		if c.Kafka[prop] != want {
			t.Errorf("%s = %q, want %q", prop, c.Kafka[prop], want)
		}
	}
	if c.TransactionTimeout != 30*time.Second {
		t.Errorf("TransactionTimeout = %s", c.TransactionTimeout)
	}
	if got := c.VarForProperty("sasl.mechanism"); got != "RELAY_KAFKA_SASL_MECHANISM" {
		t.Errorf("VarForProperty = %q", got)
	}
}

func TestEveryProblemIsReported(t *testing.T) {
	_, err := load(t, map[string]string{EnvCommitInterval: "x", EnvMaxRecordsPerTxn: "y"})
	var names []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *Error
		if !errors.As(e, &ce) {
			t.Fatalf("%v is not a *config.Error", e)
		}
		names = append(names, ce.Var)
	}
	for _, want := range []string{EnvSourceTopics, EnvTransactionalID, EnvBootstrapServers, EnvCommitInterval, EnvMaxRecordsPerTxn} {
		if !strings.Contains(strings.Join(names, ","), want) {
			t.Errorf("problems %v do not include %s", names, want)
		}
	}
}

func TestEmptyHTTPAddrDisablesEndpoint(t *testing.T) {
	c, err := load(t, with(map[string]string{EnvHTTPAddr: ""}))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != "" {
		t.Errorf("HTTPAddr = %q, want empty", c.HTTPAddr)
	}
}

func TestUnknownVariables(t *testing.T) {
	got := Unknown([]string{"RELAY_COMIT_INTERVAL=1s", "RELAY_KAFKA_ACKS=all", "RELAY_GROUP_ID=g", "RELAY_STACK_DIR=/x", "HOME=/root"})
	if len(got) != 1 || got[0] != "RELAY_COMIT_INTERVAL" {
		t.Errorf("Unknown = %v, want [RELAY_COMIT_INTERVAL]", got)
	}
}

// Every default docs/REFERENCE.md shows from Vars is the one the parser
// applies: relay's own variables, and the passthrough properties relay
// sets (or, unset, derives) itself.
func TestVarsDefaultsAreApplied(t *testing.T) {
	c, err := load(t, minimal)
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]string{
		EnvAutoOffsetReset:    "auto.offset.reset",
		EnvMetadataRefresh:    "topic.metadata.refresh.interval.ms",
		EnvTransactionTimeout: "transaction.timeout.ms",
	}
	for _, v := range Vars {
		got, ok := c.raw[v.Name]
		if prop, passthrough := props[v.Name]; passthrough {
			got, ok = c.Kafka[prop]
		}
		if !ok || v.Required {
			continue
		}
		if got != v.Default {
			t.Errorf("%s: parser default %q, Vars says %q", v.Name, got, v.Default)
		}
	}
	if want := defaultOf(EnvTransactionTimeout); c.Kafka["transaction.timeout.ms"] != want {
		t.Errorf("derived transaction.timeout.ms = %q, want %q", c.Kafka["transaction.timeout.ms"], want)
	}
	if c.MaxPollInterval != defaultMaxPollInterval {
		t.Errorf("MaxPollInterval = %s", c.MaxPollInterval)
	}
}

// A group.instance.id with static membership off is a contradiction,
// named at start-up.
func TestStaticMembershipOffWithAnInstanceID(t *testing.T) {
	env := map[string]string{"RELAY_SOURCE_TOPICS": "orders", "RELAY_TRANSACTIONAL_ID": "relay-0", "RELAY_KAFKA_BOOTSTRAP_SERVERS": "b:9092",
		EnvStaticMembership: "false", "RELAY_KAFKA_GROUP_INSTANCE_ID": "relay-0"}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	_, err := Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, environ)
	if err == nil || !strings.Contains(err.Error(), EnvStaticMembership) || !strings.Contains(err.Error(), "RELAY_KAFKA_GROUP_INSTANCE_ID") {
		t.Fatalf("Load = %v, want an error naming both variables", err)
	}
}
