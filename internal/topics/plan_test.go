package topics

import (
	"context"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
)

func TestPlanEveryHopKeepsSourcePartitions(t *testing.T) {
	env := map[string]string{
		config.EnvSourceTopics: "orders,payments", config.EnvTransactionalID: "x", config.EnvBootstrapServers: "b:9092",
		config.EnvRetryTiers: "30s,5m", config.EnvRetryMaxElapsed: "2h",
	}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, environ)
	if err != nil {
		t.Fatal(err)
	}
	plan := Plan(cfg, map[string]int{"orders": 12, "payments": 3})
	got := map[string]Spec{}
	for _, s := range plan {
		got[s.Name] = s
	}
	for name, want := range map[string]int{
		"orders.valid": 12, "orders.retry.30s": 12, "orders.retry.5m": 12, "orders.quarantine": 12,
		"orders.rejected": 12, "orders.replay": 12, "payments.quarantine": 3, "_relay.relay.state": 12,
	} {
		if got[name].Partitions != want {
			t.Errorf("%s: %d partitions, want %d", name, got[name].Partitions, want)
		}
	}
	if len(plan) != 2*6+1 {
		t.Errorf("%d topics planned, want 13", len(plan))
	}
	if r := got["orders.quarantine"].Configs["retention.ms"]; r != "2592000000" {
		t.Errorf("quarantine retention %s, want 30 days", r)
	}
	if r := got["orders.retry.5m"].Configs["retention.ms"]; r != "86400000" {
		t.Errorf("tier retention %s, want max(2×2h, 1 day)", r)
	}
	if got["_relay.relay.state"].Configs["cleanup.policy"] != "compact" {
		t.Error("state topic must be compacted")
	}
	short := State{Spec: got["orders.quarantine"], Have: 4}
	if p := short.Problem(); !strings.Contains(p, "has 4 partitions, fewer than source \"orders\"'s 12") {
		t.Errorf("problem: %q", p)
	}
	if err := Check([]State{short, {Spec: got["orders.valid"], Have: 12}}); err == nil || strings.Count(err.Error(), "\n") != 0 {
		t.Errorf("check: %v", err)
	}
}

// flakyWatermarks answers "not leader" to the first fails queries of each
// partition, as a fresh broker does for a while after creating a topic.
type flakyWatermarks struct {
	fails int
	calls map[int32]int
}

func (f *flakyWatermarks) QueryWatermarkOffsets(_ string, p int32, _ int) (int64, int64, error) {
	f.calls[p]++
	if f.calls[p] <= f.fails {
		return 0, 0, kafka.NewError(kafka.ErrNotLeaderForPartition, "Broker: Not leader for partition", true)
	}
	return 0, 0, nil
}

func TestWaitAnsweringRetriesUntilEveryPartitionAnswers(t *testing.T) {
	w := &flakyWatermarks{fails: 2, calls: map[int32]int{}}
	if err := waitAnswering(context.Background(), w, "orders.valid", 3); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if w.calls[p] != 3 {
			t.Errorf("partition %d asked %d times, want 3", p, w.calls[p])
		}
	}
	// A partition that never answers ends with the topic, the partition
	// and the broker's last word, once ctx ends.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w = &flakyWatermarks{fails: 1 << 30, calls: map[int32]int{}}
	err := waitAnswering(ctx, w, "orders.valid", 3)
	if err == nil || !strings.Contains(err.Error(), "orders.valid") || !strings.Contains(err.Error(), "partition 0") || !strings.Contains(err.Error(), "Not leader") {
		t.Errorf("never answering: %v", err)
	}
}
