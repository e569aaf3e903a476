package main

import (
	"bytes"
	"context"
	"relay/internal/cli"
	"strings"
	"testing"
)

// Bad input to the operator commands exits 2, names the problem, and
// reaches no broker: nothing can have been written.
func TestOperatorCommandsRefuseBadInput(t *testing.T) {
	broker, accepted := countingListener(t)
	lookup, environ := env(map[string]string{"RELAY_SOURCE_TOPICS": "orders", "RELAY_KAFKA_BOOTSTRAP_SERVERS": broker})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--all"}, "--reason is required"},
		{[]string{"replay", "--reason", "fix"}, "no selection"},
		{[]string{"replay", "--reason", "fix", "--all", "--rate", "0"}, "--rate 0"},
		{[]string{"replay", "--reason", "fix", "--all", "--max-failure-rate", "2"}, "--max-failure-rate 2"},
		{[]string{"replay", "--reason", "fix", "--ids", "not-an-id"}, "not a failure id"},
		{[]string{"replay", "--reason", "fix", "--since", "yesterday"}, "--since"},
		{[]string{"replay", "--reason", "fix", "--all", "--progress", "fancy"}, "--progress"},
		{[]string{"replay", "--reason", "fix", "orders/0/1"}, "failure ids go in --ids"},
		{[]string{"quarantine", "discard", "orders/0/1"}, "--reason is required"},
		{[]string{"quarantine", "discard", "--reason", "x"}, "no failure id"},
		{[]string{"quarantine", "list", "--state", "lost"}, "--state"},
		{[]string{"quarantine", "list", "--min-age", "ages"}, "--min-age"},
		{[]string{"quarantine", "show", "x"}, "not a failure id"},
		{[]string{"quarantine", "purge"}, "unknown command"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, lookup, environ, &stdout, &stderr)
		if code != cli.Usage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("relay %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("bad input reached the broker %d times", n)
	}
}
