package integration

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBadConfigurationProcess runs the real binary with bad environments: it
// must exit 2 and name the variable, as operators and orchestrators see it.
// The full table lives in cmd/relay's unit tests; this proves the process
// boundary (exit code through main, message on stderr).
func TestBadConfigurationProcess(t *testing.T) {
	base := []string{
		"PATH=" + os.Getenv("PATH"),
		"RELAY_SOURCE_TOPICS=orders",
		"RELAY_TRANSACTIONAL_ID=relay-0",
		"RELAY_KAFKA_BOOTSTRAP_SERVERS=" + bootstrap,
		"RELAY_HTTP_ADDR=",
	}
	for _, tc := range []struct{ env, wantVar string }{
		{"RELAY_COMMIT_INTERVAL=fast", "RELAY_COMMIT_INTERVAL"},
		{"RELAY_KAFKA_TRANSACTION_TIMEOUT_MS=50", "RELAY_COMMIT_INTERVAL"},
		{"RELAY_KAFKA_ENABLE_AUTO_COMMIT=true", "RELAY_KAFKA_ENABLE_AUTO_COMMIT"},
		{"RELAY_KAFKA_COMPRESSION_TYPE=zip", "RELAY_KAFKA_COMPRESSION_TYPE"},
		{"RELAY_SOURCE_TOPICS=", "RELAY_SOURCE_TOPICS"},
	} {
		cmd := exec.Command(relayBin, "run")
		cmd.Env = append(append([]string{}, base...), tc.env)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 {
			t.Errorf("%s: exit %d, want 2\n%s", tc.env, code, out)
			continue
		}
		if !strings.Contains(string(out), tc.wantVar) {
			t.Errorf("%s: output does not name %s:\n%s", tc.env, tc.wantVar, out)
		}
	}
}

// TestPreflightRefusesShortOutput: outputs keep the source partition number,
// so an output topic with fewer partitions than its source would make every
// transaction abort. relay refuses to start and names both topics and counts.
func TestPreflightRefusesShortOutput(t *testing.T) {
	src := uniq(t, "src")
	createTopics(t, 3, src)
	createTopics(t, 2, src+".valid")
	r := startRelay(t, "relay", map[string]string{
		"RELAY_SOURCE_TOPICS": src, "RELAY_TRANSACTIONAL_ID": uniq(t, "txn"), "RELAY_GROUP_ID": uniq(t, "grp"),
	})
	if code := r.wait(60 * time.Second); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	out := r.stderr.String()
	for _, want := range []string{src + ".valid", "has 2 partitions", "3"} {
		if !strings.Contains(out, want) {
			t.Errorf("preflight message lacks %q:\n%s", want, out)
		}
	}
}
