package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// On three brokers, `relay topics apply` creates relay's topics with
// min.insync.replicas 2 and raises a topic of relay's left at 1 (the
// cluster's default here is 2, so the test lowers one first); `relay
// topics plan` then marks none at risk, and says so of a topic at 1 before
// apply. relay run with RELAY_TOPICS_DURABILITY=require refuses a source
// at min.insync.replicas 1, naming it (exit 2).
func TestClusterTopicsAreDurable(t *testing.T) {
	needCluster(t)
	src, group := uniq(t, "src"), uniq(t, "grp")
	createTopics(t, 2, src)
	env := []string{"PATH=" + os.Getenv("PATH"), "RELAY_KAFKA_BOOTSTRAP_SERVERS=" + bootstrap,
		"RELAY_SOURCE_TOPICS=" + src, "RELAY_GROUP_ID=" + group, "RELAY_RETRY_TIERS=1s"}
	relay := func(args ...string) (string, error) {
		cmd := exec.Command(relayBin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := relay("topics", "apply", "--replication-factor", "3"); err != nil {
		t.Fatalf("relay topics apply: %v\n%s", err, out)
	}
	views := planViews(t, relay)
	if len(views) != 6 {
		t.Fatalf("plan shows %d topics, want 6", len(views))
	}
	for _, v := range views {
		if v.Replicas != 3 || v.MinInsync != 2 || v.Risk != "" {
			t.Errorf("%s after apply: %d replicas, min.insync.replicas %d, risk %q; want 3, 2, none", v.Topic, v.Replicas, v.MinInsync, v.Risk)
		}
	}

	quarantine := src + ".quarantine"
	setMinInsync(t, quarantine, "1")
	setMinInsync(t, src, "1")
	for _, v := range planViews(t, relay) {
		if v.Topic == quarantine && !strings.Contains(v.Risk, "min.insync.replicas 1") {
			t.Errorf("%s at min.insync.replicas 1: risk %q", v.Topic, v.Risk)
		}
	}
	out, err := relay("topics", "apply", "--replication-factor", "3")
	if err != nil || !strings.Contains(out, "raised min.insync.replicas of "+quarantine) {
		t.Fatalf("relay topics apply: %v; want it to raise %s:\n%s", err, quarantine, out)
	}
	for _, v := range planViews(t, relay) {
		if v.Topic == quarantine && (v.MinInsync != 2 || v.Risk != "") {
			t.Errorf("%s after apply: min.insync.replicas %d, risk %q", v.Topic, v.MinInsync, v.Risk)
		}
	}

	env = append(env, "RELAY_TOPICS_DURABILITY=require", "RELAY_TRANSACTIONAL_ID="+uniq(t, "txn"), "RELAY_HTTP_ADDR=127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, relayBin, "run")
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(b), "source topic \""+src+"\": min.insync.replicas 1") ||
		!strings.Contains(string(b), "RELAY_TOPICS_DURABILITY=require") {
		t.Fatalf("relay run with a source at min.insync.replicas 1 and RELAY_TOPICS_DURABILITY=require: exit %d (%v), want 2 naming the source:\n%s", code, err, tail(string(b), 30))
	}
}

// topicView is a topic as `relay topics plan -o json` shows it.
type topicView struct {
	Topic     string `json:"topic"`
	Replicas  int    `json:"replicas"`
	MinInsync int    `json:"minInsyncReplicas"`
	Risk      string `json:"risk"`
}

func planViews(t *testing.T, relay func(...string) (string, error)) []topicView {
	t.Helper()
	out, err := relay("topics", "plan", "-o", "json")
	if err != nil {
		t.Fatalf("relay topics plan: %v\n%s", err, out)
	}
	var views []topicView
	i := strings.Index(out, "[")
	if i < 0 {
		t.Fatalf("relay topics plan -o json printed no array:\n%s", out)
	}
	if err := json.Unmarshal([]byte(out[i:]), &views); err != nil {
		t.Fatalf("relay topics plan -o json: %v\n%s", err, out)
	}
	return views
}

// setMinInsync sets min.insync.replicas of topic, as an operator could.
func setMinInsync(t *testing.T, topic, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := admin(t).IncrementalAlterConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: topic,
		Config: []kafka.ConfigEntry{{Name: "min.insync.replicas", Value: value, IncrementalOperation: kafka.AlterConfigOpTypeSet}}}})
	if err == nil && res[0].Error.Code() != kafka.ErrNoError {
		err = res[0].Error
	}
	if err != nil {
		t.Fatalf("set min.insync.replicas of %s to %s: %v", topic, value, err)
	}
}
