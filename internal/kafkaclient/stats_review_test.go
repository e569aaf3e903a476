package kafkaclient

import (
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// RELAY_KAFKA_STATISTICS_INTERVAL_MS sets the interval of the loop's two
// clients only: every other client relay builds (readers, the watermark
// probe, the operator commands' transactional writer, admin clients, the
// plain producer) has nobody to read statistics, and a producer whose
// Events() nobody drains keeps every document in its events channel (up
// to go.events.channel.size of them), then in librdkafka's queue.
func TestStatisticsIntervalFromThePassthroughReachesTheLoopOnly(t *testing.T) {
	cfg := testConfig(t, map[string]string{"RELAY_KAFKA_STATISTICS_INTERVAL_MS": "5000"})
	if v := (*loopConsumerConfig(cfg, nil))["statistics.interval.ms"]; v != "5000" {
		t.Errorf("loop consumer: statistics.interval.ms=%v, want 5000", v)
	}
	if v := (*loopProducerConfig(cfg, nil))["statistics.interval.ms"]; v != "5000" {
		t.Errorf("loop producer: statistics.interval.ms=%v, want 5000", v)
	}
	others := map[string]kafka.ConfigMap{
		"reader": *build(cfg, kindConsumer, kafka.ConfigMap{}, nil),
		"writer": *build(cfg, kindProducer, kafka.ConfigMap{"go.delivery.reports": false}, nil),
		"admin":  *build(cfg, "", kafka.ConfigMap{}, nil),
	}
	for name, m := range others {
		if v, ok := m["statistics.interval.ms"]; ok {
			t.Errorf("%s: statistics.interval.ms=%v: nobody reads its statistics", name, v)
		}
	}
}

// The operator commands' writer never reads its Events(): with the
// passthrough's interval its statistics pile up there.
func TestWriterKeepsNoStatistics(t *testing.T) {
	cfg := testConfig(t, map[string]string{"RELAY_KAFKA_STATISTICS_INTERVAL_MS": "10"})
	p, err := Writer(cfg, "stats-review")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	time.Sleep(500 * time.Millisecond)
	stats := 0
	for len(p.Events()) > 0 {
		if _, ok := (<-p.Events()).(*kafka.Stats); ok {
			stats++
		}
	}
	if stats > 0 {
		t.Fatalf("%d statistics documents waiting in a writer's events channel nobody reads", stats)
	}
}
