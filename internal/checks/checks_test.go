package checks

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"relay/internal/config"
	"relay/internal/schema"
)

func testConfig(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	all := map[string]string{
		"RELAY_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "RELAY_SOURCE_TOPICS": "orders", "RELAY_TRANSACTIONAL_ID": "t",
	}
	for k, v := range env {
		all[k] = v
	}
	var environ []string
	for k, v := range all {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := all[k]; return v, ok }, environ)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestPolicyFollowsTheConfiguration(t *testing.T) {
	p := Policy(testConfig(t, map[string]string{"RELAY_RETRY_TIERS": "1s,1m", "RELAY_ORDERING": "partition", "RELAY_BLOCKING_ATTEMPTS": "3"}))
	if len(p.Tiers) != 2 || p.Tiers[1].Minutes() != 1 || !p.WaitInPlace || p.BlockingAttempts != 3 {
		t.Fatalf("policy %+v does not follow the configuration", p)
	}
}

func TestNoRulesFileNoRules(t *testing.T) {
	rs, err := Rules(testConfig(t, nil))
	if rs != nil || err != nil {
		t.Fatalf("Rules without a file = %v, %v", rs, err)
	}
}

// Admitter waits while the registry is unavailable, saying so, and
// gives up at once on an answer that waiting will not change.
func TestAdmitterWaitsOnlyForAnUnavailableRegistry(t *testing.T) {
	var hits atomic.Int32
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error_code":50301,"message":"loading"}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error_code":40401,"message":"Subject 'orders-value' not found."}`))
	}))
	defer reg.Close()
	cfg := testConfig(t, map[string]string{"RELAY_SCHEMA_REGISTRY_URL": reg.URL, "RELAY_SCHEMA_SUBJECT": "orders-value", "RELAY_SCHEMA_ACCEPT": "1"})
	var logs bytes.Buffer
	_, err := Admitter(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	if !errors.Is(err, schema.ErrNotFound) || hits.Load() != 2 {
		t.Fatalf("%v after %d requests; want not found after one wait", err, hits.Load())
	}
	if !strings.Contains(logs.String(), "schema registry unavailable at start-up; retrying") {
		t.Fatalf("the wait is not logged:\n%s", logs.String())
	}
}

// A registry that refuses relay's credential at start-up is not waited
// for: the credential will not fix itself, and relay stops naming it.
func TestRefusedCredentialAtStartUpIsNotWaitedFor(t *testing.T) {
	var hits atomic.Int32
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("Authorization") != "Bearer right" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	defer reg.Close()
	cfg := testConfig(t, map[string]string{"RELAY_SCHEMA_REGISTRY_URL": reg.URL, "RELAY_SCHEMA_SUBJECT": "orders-value", "RELAY_SCHEMA_ACCEPT": "1",
		"RELAY_SCHEMA_REGISTRY_PASSWORD": "wrong"})
	var refused []bool
	_, err := Admitter(context.Background(), cfg, slog.New(slog.DiscardHandler), func(r bool, _ int) { refused = append(refused, r) })
	var un *schema.UnauthorizedError
	if !errors.As(err, &un) || hits.Load() != 1 || len(refused) != 1 || !refused[0] {
		t.Fatalf("%v after %d requests, heard %v; want an *UnauthorizedError at once", err, hits.Load(), refused)
	}
}
