package config

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"relay/internal/readme"
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
		{"HTTPAddr", c.HTTPAddr, "127.0.0.1:9464"},
		{"output", c.Derived("orders").Output, "orders.valid"},
		{"auto.offset.reset", c.Kafka["auto.offset.reset"], "earliest"},
		{"TransactionTimeout", c.TransactionTimeout, 60 * time.Second},
		{"transaction.timeout.ms", c.Kafka["transaction.timeout.ms"], "60000"},
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

// The README lists every variable and every managed property from here;
// this keeps the two from drifting apart.
func TestReadmeListsEveryVariable(t *testing.T) {
	names := make([]string, len(Vars))
	for i, v := range Vars {
		names[i] = v.Name
	}
	readme.Lists(t, "variable", names...)
	readme.Lists(t, "managed property", slices.Collect(maps.Keys(managedProps))...)
}
