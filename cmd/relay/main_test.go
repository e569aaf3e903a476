package main

import (
	"bytes"
	"context"
	"net"
	"relay/internal/cli"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// env builds lookup and environ from a map.
func env(m map[string]string) (func(string) (string, bool), []string) {
	var environ []string
	for k, v := range m {
		environ = append(environ, k+"="+v)
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }, environ
}

// countingListener stands in for a broker: a bad configuration must stop
// relay before it connects anywhere.
func countingListener(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String(), accepted
}

func TestBadConfigurationExitsTwoNamingTheVariable(t *testing.T) {
	broker, accepted := countingListener(t)
	good := map[string]string{
		"RELAY_SOURCE_TOPICS":           "orders",
		"RELAY_TRANSACTIONAL_ID":        "relay-0",
		"RELAY_KAFKA_BOOTSTRAP_SERVERS": broker,
		"RELAY_HTTP_ADDR":               "",
	}
	for _, tc := range []struct {
		name    string
		set     map[string]string
		unset   string
		wantVar string
	}{
		{name: "missing sources", unset: "RELAY_SOURCE_TOPICS", wantVar: "RELAY_SOURCE_TOPICS"},
		{name: "empty sources", set: map[string]string{"RELAY_SOURCE_TOPICS": " , "}, wantVar: "RELAY_SOURCE_TOPICS"},
		{name: "bad topic name", set: map[string]string{"RELAY_SOURCE_TOPICS": "orders,bad topic"}, wantVar: "RELAY_SOURCE_TOPICS"},
		{name: "missing transactional id", unset: "RELAY_TRANSACTIONAL_ID", wantVar: "RELAY_TRANSACTIONAL_ID"},
		{name: "missing bootstrap", unset: "RELAY_KAFKA_BOOTSTRAP_SERVERS", wantVar: "RELAY_KAFKA_BOOTSTRAP_SERVERS"},
		{name: "unparsable interval", set: map[string]string{"RELAY_COMMIT_INTERVAL": "soon"}, wantVar: "RELAY_COMMIT_INTERVAL"},
		{name: "negative interval", set: map[string]string{"RELAY_COMMIT_INTERVAL": "-1s"}, wantVar: "RELAY_COMMIT_INTERVAL"},
		{name: "interval beyond max poll interval", set: map[string]string{"RELAY_COMMIT_INTERVAL": "5m"}, wantVar: "RELAY_COMMIT_INTERVAL"},
		{name: "interval beyond lowered txn timeout", set: map[string]string{"RELAY_COMMIT_INTERVAL": "5s", "RELAY_KAFKA_TRANSACTION_TIMEOUT_MS": "10000"}, wantVar: "RELAY_COMMIT_INTERVAL"},
		{name: "bad txn timeout", set: map[string]string{"RELAY_KAFKA_TRANSACTION_TIMEOUT_MS": "ten"}, wantVar: "RELAY_KAFKA_TRANSACTION_TIMEOUT_MS"},
		{name: "zero max records", set: map[string]string{"RELAY_MAX_RECORDS_PER_TXN": "0"}, wantVar: "RELAY_MAX_RECORDS_PER_TXN"},
		{name: "huge max records", set: map[string]string{"RELAY_MAX_RECORDS_PER_TXN": "99999999"}, wantVar: "RELAY_MAX_RECORDS_PER_TXN"},
		{name: "bad shutdown timeout", set: map[string]string{"RELAY_SHUTDOWN_TIMEOUT": "30"}, wantVar: "RELAY_SHUTDOWN_TIMEOUT"},
		{name: "bad op timeout", set: map[string]string{"RELAY_OP_TIMEOUT": "0s"}, wantVar: "RELAY_OP_TIMEOUT"},
		{name: "bad log level", set: map[string]string{"RELAY_LOG_LEVEL": "loud"}, wantVar: "RELAY_LOG_LEVEL"},
		{name: "bad log format", set: map[string]string{"RELAY_LOG_FORMAT": "xml"}, wantVar: "RELAY_LOG_FORMAT"},
		{name: "bad http addr", set: map[string]string{"RELAY_HTTP_ADDR": "localhost"}, wantVar: "RELAY_HTTP_ADDR"},
		{name: "output loops to source", set: map[string]string{"RELAY_SOURCE_TOPICS": "a,a.valid"}, wantVar: "RELAY_OUTPUT_TOPIC"},
		{name: "fixed output for two sources", set: map[string]string{"RELAY_SOURCE_TOPICS": "a,b", "RELAY_OUTPUT_TOPIC": "out"}, wantVar: "RELAY_OUTPUT_TOPIC"},
		{name: "bad offset reset", set: map[string]string{"RELAY_KAFKA_AUTO_OFFSET_RESET": "middle"}, wantVar: "RELAY_KAFKA_AUTO_OFFSET_RESET"},
		{name: "managed property", set: map[string]string{"RELAY_KAFKA_ENABLE_AUTO_COMMIT": "true"}, wantVar: "RELAY_KAFKA_ENABLE_AUTO_COMMIT"},
		{name: "managed isolation", set: map[string]string{"RELAY_KAFKA_ISOLATION_LEVEL": "read_uncommitted"}, wantVar: "RELAY_KAFKA_ISOLATION_LEVEL"},
		{name: "unknown librdkafka property", set: map[string]string{"RELAY_KAFKA_NO_SUCH_THING": "1"}, wantVar: "RELAY_KAFKA_NO_SUCH_THING"},
		{name: "bad librdkafka value", set: map[string]string{"RELAY_KAFKA_LINGER_MS": "abc"}, wantVar: "RELAY_KAFKA_LINGER_MS"},
		{name: "bad consumer value", set: map[string]string{"RELAY_KAFKA_SESSION_TIMEOUT_MS": "-5"}, wantVar: "RELAY_KAFKA_SESSION_TIMEOUT_MS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]string{}
			for k, v := range good {
				m[k] = v
			}
			for k, v := range tc.set {
				m[k] = v
			}
			delete(m, tc.unset)
			lookup, environ := env(m)
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"run"}, lookup, environ, &stdout, &stderr)
			if code != cli.Usage {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, cli.Usage, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantVar) {
				t.Fatalf("stderr does not name %s:\n%s", tc.wantVar, stderr.String())
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // a connection attempt would have landed by now
	if n := accepted.Load(); n != 0 {
		t.Fatalf("relay connected to the broker %d times despite a bad configuration", n)
	}
}

func TestConfigCommandMasksSecrets(t *testing.T) {
	lookup, environ := env(map[string]string{
		"RELAY_SOURCE_TOPICS":           "orders",
		"RELAY_TRANSACTIONAL_ID":        "relay-0",
		"RELAY_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092",
		"RELAY_KAFKA_SASL_PASSWORD":     "hunter2",
		"RELAY_KAFKA_SASL_USERNAME":     "svc",
		"RELAY_KAFKA_SSL_KEY_PEM":       "-----BEGIN PRIVATE KEY-----abc",
	})
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"config"}, lookup, environ, &stdout, &stderr); code != cli.OK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, secret := range []string{"hunter2", "PRIVATE KEY"} {
		if strings.Contains(out, secret) {
			t.Errorf("relay config printed a secret %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{"RELAY_KAFKA_SASL_PASSWORD=****", "RELAY_KAFKA_SASL_USERNAME=svc", "RELAY_KAFKA_AUTO_OFFSET_RESET=earliest", "RELAY_COMMIT_INTERVAL=100ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestUsage(t *testing.T) {
	lookup, environ := env(nil)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{nil, cli.Usage},
		{[]string{"frobnicate"}, cli.Usage},
		{[]string{"run", "--fast"}, cli.Usage},
		{[]string{"--help"}, cli.OK},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), tc.args, lookup, environ, &out, &errb); code != tc.code {
			t.Errorf("relay %v: exit %d, want %d", tc.args, code, tc.code)
		}
	}
}

// TestConfigCommandShowsDerivedValues: a first-time hook user with every
// other variable at its default gets a configuration, and relay config shows
// the values relay worked out for what was left unset.
func TestConfigCommandShowsDerivedValues(t *testing.T) {
	base := map[string]string{
		"RELAY_SOURCE_TOPICS":           "orders",
		"RELAY_TRANSACTIONAL_ID":        "relay-0",
		"RELAY_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092",
		"RELAY_SCHEMA_REGISTRY_URL":     "http://127.0.0.1:8081/apis/ccompat/v7",
		"RELAY_SCHEMA_SUBJECT":          "orders-value",
		"RELAY_SCHEMA_ACCEPT":           "2-3",
		"RELAY_HOOK_URL":                "http://127.0.0.1:8080/check",
	}
	lookup, environ := env(base)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"config"}, lookup, environ, &stdout, &stderr); code != cli.OK {
		t.Fatalf("registry and hook with the defaults: exit %d:\n%s", code, stderr.String())
	}
	for _, want := range []string{"RELAY_KAFKA_TRANSACTION_TIMEOUT_MS=45000", "RELAY_SCHEMA_READER_VERSION=3"} {
		if !strings.Contains(stdout.String(), want+"\n") {
			t.Errorf("missing %q in:\n%s", want, stdout.String())
		}
	}

	// A value the user sets wins, and one that does not fit is refused
	// naming the variable.
	base["RELAY_KAFKA_TRANSACTION_TIMEOUT_MS"] = "10000"
	lookup, environ = env(base)
	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"config"}, lookup, environ, &stdout, &stderr); code != cli.Usage {
		t.Fatalf("a 10s transaction timeout with a hook: exit %d, want %d", code, cli.Usage)
	}
	if !strings.Contains(stderr.String(), "RELAY_KAFKA_TRANSACTION_TIMEOUT_MS") {
		t.Errorf("the refusal does not name the variable:\n%s", stderr.String())
	}
}
