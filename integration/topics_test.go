package integration

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// TestTopicsApplyLeavesUsableTopics: when `relay topics apply` returns,
// every partition it created answers a watermark query from a new client
// at once, with no retry: the next step of an operator (or of make demo)
// must not meet "not leader for partition" on a fresh broker.
func TestTopicsApplyLeavesUsableTopics(t *testing.T) {
	const partitions = 12
	src := uniq(t, "src")
	createTopics(t, partitions, src)
	cmd := exec.Command(relayBin, "topics", "apply", "--replication-factor", "1")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "RELAY_KAFKA_BOOTSTRAP_SERVERS=" + bootstrap,
		"RELAY_SOURCE_TOPICS=" + src, "RELAY_GROUP_ID=" + uniq(t, "grp"), "RELAY_RETRY_TIERS=1s,2s,3s,4s"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("relay topics apply: %v\n%s", err, out)
	}
	var created []string
	for _, line := range strings.Split(string(out), "\n") {
		if name, ok := strings.CutPrefix(line, "created "); ok {
			created = append(created, name)
		}
	}
	if len(created) != 9 {
		t.Fatalf("created %d topics, want 9 (output, 4 tiers, quarantine, rejected, replay, state):\n%s", len(created), out)
	}
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, topic := range created {
		for part := range int32(partitions) {
			if _, _, err := p.QueryWatermarkOffsets(topic, part, 10000); err != nil {
				t.Errorf("watermarks of %s[%d] right after apply: %v", topic, part, err)
			}
		}
	}
}

// The operator commands that write transactions (replay, discard) check
// transaction.timeout.ms against the broker's transaction.max.timeout.ms
// as relay run does, and name the variable: the broker's own refusal of
// the producer names neither it nor the limit. Nothing is written.
func TestWritingCommandsCheckTheBrokerTransactionMax(t *testing.T) {
	s := newScenario(t, 1)
	tooLong := []string{"RELAY_KAFKA_TRANSACTION_TIMEOUT_MS", "3600000"} // the broker allows 15 minutes
	for _, args := range [][]string{
		{"replay", "--all", "--reason", "fix", "--progress", "none"},
		{"quarantine", "discard", s.src.topic + "/0/0", "--reason", "gone"},
	} {
		res := s.cli(t, tooLong, args...)
		if res.code != 2 || !strings.Contains(res.stderr, "RELAY_KAFKA_TRANSACTION_TIMEOUT_MS") || !strings.Contains(res.stderr, "transaction.max.timeout.ms") {
			t.Errorf("relay %s with a timeout above the broker's: exit %d, want 2 naming the variable and the limit:\n%s", args[0], res.code, res.stderr)
		}
	}
}
