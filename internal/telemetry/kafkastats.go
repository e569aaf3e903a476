package telemetry

import (
	"context"
	"encoding/json"
	"sort"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// librdkafka's statistics (statistics.interval.ms) of the loop's consumer
// and producer, the few an operator asks about: how long brokers take to
// answer, how much waits to be sent, the transaction's state and the
// consumer's fetching.
const (
	MetricKafkaBrokerRTT      = "relay.kafka.broker.rtt"
	MetricKafkaBrokerRequests = "relay.kafka.broker.requests"
	MetricKafkaProducerQueue  = "relay.kafka.producer.queue.messages"
	MetricKafkaProducerBytes  = "relay.kafka.producer.queue.bytes"
	MetricKafkaTxnState       = "relay.kafka.transaction.state"
	MetricKafkaFetchState     = "relay.kafka.consumer.partitions"
	MetricKafkaGroupState     = "relay.kafka.consumer.group.state"
)

// rdStats is the part of librdkafka's statistics document relay reads.
type rdStats struct {
	MsgCnt  int64 `json:"msg_cnt"`
	MsgSize int64 `json:"msg_size"`
	Brokers map[string]struct {
		NodeID   int32 `json:"nodeid"`
		Outbuf   int64 `json:"outbuf_cnt"`
		Waitresp int64 `json:"waitresp_cnt"`
		RTT      struct {
			Avg int64 `json:"avg"` // microseconds
			P99 int64 `json:"p99"`
		} `json:"rtt"`
	} `json:"brokers"`
	Topics map[string]struct {
		Partitions map[string]struct {
			FetchState string `json:"fetch_state"`
		} `json:"partitions"`
	} `json:"topics"`
	Cgrp *struct {
		State     string `json:"state"`
		JoinState string `json:"join_state"`
	} `json:"cgrp"`
	EOS *struct {
		TxnState string `json:"txn_state"`
	} `json:"eos"`
}

// kafkaStats keeps the last statistics of each client, for the gauges.
// A document is parsed when the gauges are read, not when it comes: the
// loop's consumer hands it over on the loop's goroutine, and with many
// partitions it is large.
type kafkaStats struct {
	mu     sync.Mutex
	raw    map[string]string   // by client (consumer, producer): the last document, not parsed yet
	parsed map[string]*rdStats // by client: the last document that parsed
}

// Statistics implements txn.Observer: the last statistics of client
// replace its earlier ones. A document that does not parse is dropped
// when it is read (librdkafka's own; the gauges keep the last good one).
func (m *Metrics) Statistics(client, doc string) {
	m.kstats.mu.Lock()
	defer m.kstats.mu.Unlock()
	if m.kstats.raw == nil {
		m.kstats.raw, m.kstats.parsed = map[string]string{}, map[string]*rdStats{}
	}
	m.kstats.raw[client] = doc
}

// each calls f with every client's last statistics, in a stable order.
// The lock is held only to take the documents: Statistics, on the loop's
// goroutine, never waits for a parse or for the gauges' observers.
func (k *kafkaStats) each(f func(client string, s *rdStats)) {
	k.mu.Lock()
	raw := k.raw
	if len(raw) > 0 {
		k.raw = map[string]string{}
	}
	k.mu.Unlock()
	fresh := map[string]*rdStats{}
	for c, doc := range raw {
		var s rdStats
		if json.Unmarshal([]byte(doc), &s) == nil {
			fresh[c] = &s
		}
	}
	k.mu.Lock()
	if k.parsed == nil {
		k.parsed = map[string]*rdStats{}
	}
	for c, s := range fresh {
		k.parsed[c] = s
	}
	parsed := make(map[string]*rdStats, len(k.parsed))
	for c, s := range k.parsed {
		parsed[c] = s
	}
	k.mu.Unlock()
	clients := make([]string, 0, len(parsed))
	for c := range parsed {
		clients = append(clients, c)
	}
	sort.Strings(clients)
	for _, c := range clients {
		f(c, parsed[c])
	}
}

func (m *Metrics) kafkaStatsGauges(meter metric.Meter) error {
	gauges := []struct {
		name    string
		observe func(client string, s *rdStats, o metric.Float64Observer)
	}{
		{MetricKafkaBrokerRTT, func(client string, s *rdStats, o metric.Float64Observer) {
			for name, b := range s.Brokers {
				if b.NodeID < 0 || b.RTT.Avg == 0 && b.RTT.P99 == 0 {
					continue // a bootstrap address, or a broker not spoken to in the interval
				}
				for stat, us := range map[string]int64{"avg": b.RTT.Avg, "p99": b.RTT.P99} {
					o.Observe(float64(us)/1e6, metric.WithAttributes(attribute.String("client", client), attribute.String("broker", name), attribute.String("stat", stat)))
				}
			}
		}},
		{MetricKafkaBrokerRequests, func(client string, s *rdStats, o metric.Float64Observer) {
			for name, b := range s.Brokers {
				if b.NodeID < 0 {
					continue
				}
				for queue, n := range map[string]int64{"waiting": b.Outbuf, "in_flight": b.Waitresp} {
					o.Observe(float64(n), metric.WithAttributes(attribute.String("client", client), attribute.String("broker", name), attribute.String("queue", queue)))
				}
			}
		}},
		{MetricKafkaProducerQueue, func(client string, s *rdStats, o metric.Float64Observer) {
			if client == "producer" {
				o.Observe(float64(s.MsgCnt))
			}
		}},
		{MetricKafkaProducerBytes, func(client string, s *rdStats, o metric.Float64Observer) {
			if client == "producer" {
				o.Observe(float64(s.MsgSize))
			}
		}},
		{MetricKafkaTxnState, func(client string, s *rdStats, o metric.Float64Observer) {
			if client == "producer" && s.EOS != nil && s.EOS.TxnState != "" {
				o.Observe(1, metric.WithAttributes(attribute.String("state", s.EOS.TxnState)))
			}
		}},
		{MetricKafkaFetchState, func(client string, s *rdStats, o metric.Float64Observer) {
			if client != "consumer" {
				return
			}
			n := map[string]int{}
			for _, t := range s.Topics {
				for id, p := range t.Partitions {
					if id != "-1" && p.FetchState != "" && p.FetchState != "none" { // -1: librdkafka's unassigned queue; none: not this member's
						n[p.FetchState]++
					}
				}
			}
			for state, c := range n {
				o.Observe(float64(c), metric.WithAttributes(attribute.String("fetch_state", state)))
			}
		}},
		{MetricKafkaGroupState, func(client string, s *rdStats, o metric.Float64Observer) {
			if client == "consumer" && s.Cgrp != nil {
				o.Observe(1, metric.WithAttributes(attribute.String("state", s.Cgrp.State), attribute.String("join_state", s.Cgrp.JoinState)))
			}
		}},
	}
	for _, g := range gauges {
		observe := g.observe
		opts := []metric.Float64ObservableGaugeOption{describe(g.name), metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			m.kstats.each(func(client string, s *rdStats) { observe(client, s, o) })
			return nil
		})}
		if g.name == MetricKafkaBrokerRTT {
			opts = append(opts, metric.WithUnit("s"))
		}
		if _, err := meter.Float64ObservableGauge(g.name, opts...); err != nil {
			return err
		}
	}
	return nil
}
