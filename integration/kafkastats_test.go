package integration

import (
	"testing"
	"time"
)

// TestKafkaStatisticsOnMetrics: librdkafka's statistics of relay's loop
// reach /metrics from the real broker: the brokers' round-trip time for
// both clients, the producer's transaction state, the consumer's group
// state and its partitions fetching, while every record is output once.
func TestKafkaStatisticsOnMetrics(t *testing.T) {
	const partitions = 2
	s := newScenario(t, partitions)
	s.src.produce(t, 200)
	addr := freeAddr(t)
	r := startRelay(t, "relay", s.env(uniq(t, "txn"), "RELAY_HTTP_ADDR", addr, "RELAY_KAFKA_STATISTICS_INTERVAL_MS", "500"))
	r.waitLog("partitions assigned", 60*time.Second)
	waitCaughtUp(t, s.group, s.src.topic, partitions, time.Minute)
	want := []struct{ name, label string }{
		{"relay_kafka_broker_rtt_seconds", `client="producer"`},
		{"relay_kafka_broker_rtt_seconds", `client="consumer"`},
		{"relay_kafka_broker_requests", `queue="in_flight"`},
		{"relay_kafka_producer_queue_messages", ""},
		{"relay_kafka_transaction_state", `state=`},
		{"relay_kafka_consumer_group_state", `join_state="steady"`},
		{"relay_kafka_consumer_partitions", `fetch_state="active"`},
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, w := range want {
		for {
			v, ok := scrapeMetric(addr, w.name, w.label)
			if ok && (w.name != "relay_kafka_consumer_partitions" || v >= partitions) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s{%s} = %v (found %v) on /metrics", w.name, w.label, v, ok)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	assertExactlyOnce(t, s.src, s.output, s.group, partitions)
	r.stop()
}
