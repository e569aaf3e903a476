package telemetry

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	dto "github.com/prometheus/client_model/go"
)

// gathered is every sample of the statistics' relay_kafka_* families, as
// name{label=value,…} → value, labels in name order.
func gathered(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "relay_kafka_") || f.GetName() == "relay_kafka_producers_abandoned" {
			continue
		}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = value(s)
		}
	}
	return out
}

func value(s *dto.Metric) float64 {
	if g := s.GetGauge(); g != nil {
		return g.GetValue()
	}
	return s.GetCounter().GetValue()
}

// The statistics librdkafka documents become the relay_kafka_* gauges:
// bootstrap and idle brokers left out, partitions counted by fetch state
// without librdkafka's unassigned queue or other members' partitions.
func TestKafkaStatisticsGauges(t *testing.T) {
	doc, err := os.ReadFile("testdata/rdkafka-stats.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close(context.Background()) }()
	if got := gathered(t, m); len(got) != 0 {
		t.Fatalf("gauges before any statistics: %v", got)
	}
	m.Statistics("producer", string(doc))
	m.Statistics("consumer", string(doc))
	gathered(t, m)
	m.Statistics("consumer", "{not json") // dropped: the last good one stays
	got := gathered(t, m)
	want := map[string]float64{
		"relay_kafka_broker_rtt_seconds{broker=kafka-0:9092/0,client=producer,stat=avg}":     0.0025,
		"relay_kafka_broker_rtt_seconds{broker=kafka-0:9092/0,client=producer,stat=p99}":     0.008,
		"relay_kafka_broker_rtt_seconds{broker=kafka-0:9092/0,client=consumer,stat=p99}":     0.008,
		"relay_kafka_broker_requests{broker=kafka-0:9092/0,client=producer,queue=waiting}":   3,
		"relay_kafka_broker_requests{broker=kafka-0:9092/0,client=producer,queue=in_flight}": 2,
		"relay_kafka_broker_requests{broker=kafka-1:9092/1,client=consumer,queue=in_flight}": 1,
		"relay_kafka_producer_queue_messages{}":                                              12,
		"relay_kafka_producer_queue_bytes{}":                                                 4096,
		"relay_kafka_transaction_state{state=InTransaction}":                                 1,
		"relay_kafka_consumer_partitions{fetch_state=active}":                                2,
		"relay_kafka_consumer_partitions{fetch_state=stopped}":                               1,
		"relay_kafka_consumer_group_state{join_state=steady,state=up}":                       1,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for k := range got {
		if strings.Contains(k, "GroupCoordinator") || strings.Contains(k, "kafka-1:9092/1") && strings.Contains(k, "rtt") ||
			strings.Contains(k, "fetch_state=none") {
			t.Errorf("%s is exported", k)
		}
	}
	if len(got) != 18 {
		t.Errorf("%d samples, want 18: %v", len(got), got)
	}
}

// librdkafka's own statistics, from a transactional producer and a group
// consumer with no broker to reach, fill the gauges they should: the
// fields relay reads are where librdkafka puts them.
func TestKafkaStatisticsOfRealClients(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close(context.Background()) }()
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": "127.0.0.1:1", "transactional.id": "stats-test",
		"statistics.interval.ms": 100, "log_level": 0})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": "127.0.0.1:1", "group.id": "stats-test",
		"statistics.interval.ms": 100, "log_level": 0})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.Subscribe("orders", nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	var producer, consumer bool
	for !producer || !consumer {
		select {
		case ev := <-p.Events():
			if s, ok := ev.(*kafka.Stats); ok {
				m.Statistics("producer", s.String())
				producer = true
			}
		case <-deadline:
			t.Fatalf("no statistics from librdkafka (producer %v, consumer %v)", producer, consumer)
		default:
			if s, ok := c.Poll(50).(*kafka.Stats); ok {
				m.Statistics("consumer", s.String())
				consumer = true
			}
		}
	}
	got := gathered(t, m)
	state, group := "", ""
	for k := range got {
		if s, ok := strings.CutPrefix(k, "relay_kafka_transaction_state{state="); ok {
			state = s
		}
		if s, ok := strings.CutPrefix(k, "relay_kafka_consumer_group_state{"); ok {
			group = s
		}
	}
	if state == "" || group == "" {
		t.Fatalf("transaction state %q, group state %q from librdkafka's statistics: %v", state, group, got)
	}
	if _, ok := got["relay_kafka_producer_queue_messages{}"]; !ok {
		t.Fatalf("no producer queue from librdkafka's statistics: %v", got)
	}
}

// BenchmarkKafkaStatistics1000Partitions reads a consumer's statistics
// with a thousand partitions, as a scrape does once per document: the
// cost every 15 s off the loop, on the scraping goroutine.
func BenchmarkKafkaStatistics1000Partitions(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"msg_cnt":0,"brokers":{"k:9092/0":{"nodeid":0,"rtt":{"avg":900,"p99":2000}}},"topics":{"orders":{"partitions":{`)
	for i := range 1000 {
		if i > 0 {
			sb.WriteString(",")
		}
		// librdkafka's partition object has some forty fields; these stand for them.
		sb.WriteString(`"` + strconv.Itoa(i) + `":{"partition":` + strconv.Itoa(i) + `,"broker":0,"leader":0,"desired":true,"unknown":false,"msgq_cnt":0,"msgq_bytes":0,"xmit_msgq_cnt":0,"xmit_msgq_bytes":0,"fetchq_cnt":12,"fetchq_size":40960,"fetch_state":"active","query_offset":-1001,"next_offset":123456,"app_offset":123450,"stored_offset":-1001,"committed_offset":123400,"eof_offset":123456,"lo_offset":0,"hi_offset":123460,"ls_offset":123460,"consumer_lag":10,"consumer_lag_stored":60,"txmsgs":0,"txbytes":0,"rxmsgs":123456,"rxbytes":12345600,"msgs":123456,"rx_ver_drops":0,"msgs_inflight":0}`)
	}
	sb.WriteString(`}}},"cgrp":{"state":"up","join_state":"steady"}}`)
	doc := sb.String()
	m, err := New(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = m.Close(context.Background()) }()
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		m.Statistics("consumer", doc)
		m.kstats.each(func(string, *rdStats) {})
	}
}
