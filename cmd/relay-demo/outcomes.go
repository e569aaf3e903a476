package main

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
)

func terminalTopics(source string) []string {
	return []string{source + ".valid", source + ".rejected", source + ".quarantine"}
}

// produceMix writes n records of the mix and returns id → kind index.
func produceMix(bootstrap, topic string, ids [4]int, n int) (map[string]int, error) {
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "enable.idempotence": true, "linger.ms": 5})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	dr := make(chan kafka.Event, 10000)
	sent := make(map[string]int, n)
	var failed error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			m := (<-dr).(*kafka.Message)
			if m.TopicPartition.Error != nil {
				failed = m.TopicPartition.Error
				continue
			}
			sent[envelope.ID(topic, m.TopicPartition.Partition, int64(m.TopicPartition.Offset))] = m.Opaque.(int)
		}
	}()
	for i := range n {
		key, value, k := order(ids, i)
		err := p.Produce(&kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key:            key, Value: value, Opaque: k,
		}, dr)
		if err != nil {
			return nil, fmt.Errorf("produce: %w", err)
		}
	}
	<-done
	if failed != nil {
		return nil, fmt.Errorf("delivery: %w", failed)
	}
	return sent, nil
}

type outcomes struct {
	byCode     map[string]int // "outcome/code" → records
	byKind     map[int]map[string]int
	found      int
	missing    int
	duplicates int
	unexpected int
	example    string // a quarantined failure id, for relay quarantine show
}

// waitOutcomes reads the terminal topics (read_committed, as business
// consumers do) until every record sent is in one of them, and checks that
// each is there exactly once and where the mix expects it.
func waitOutcomes(o options, before map[string]map[int32]int64, srcBefore map[int32]int64, sent map[string]int, exited <-chan struct{}, d time.Duration) (outcomes, error) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": o.bootstrap, "group.id": "relay-demo-verify", "enable.auto.commit": false,
		"isolation.level": "read_committed",
	})
	if err != nil {
		return outcomes{}, err
	}
	defer func() { _ = c.Close() }()
	var tps []kafka.TopicPartition
	for _, t := range terminalTopics(o.source) {
		for p := range int32(o.partitions) {
			tps = append(tps, kafka.TopicPartition{Topic: &t, Partition: p, Offset: kafka.Offset(before[t][p])})
		}
	}
	if err := c.Assign(tps); err != nil {
		return outcomes{}, err
	}
	res := outcomes{byCode: map[string]int{}, byKind: map[int]map[string]int{}}
	seen := map[string]int{}
	deadline := time.Now().Add(d)
	for len(seen) < len(sent) {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("only %d of %d records reached a terminal state within %s", len(seen), len(sent), d)
		}
		select {
		case <-exited:
			return res, errors.New("relay exited early")
		default:
		}
		m, ok := c.Poll(200).(*kafka.Message)
		if !ok {
			continue
		}
		hs := make([]envelope.Header, len(m.Headers))
		for i, h := range m.Headers {
			hs[i] = envelope.Header{Key: h.Key, Value: h.Value}
		}
		outcome, idKey := "processed", envelope.MessageID
		switch *m.TopicPartition.Topic {
		case o.source + ".rejected":
			outcome, idKey = "rejected", envelope.FailureID
		case o.source + ".quarantine":
			outcome, idKey = "quarantined", envelope.FailureID
		}
		idb, _ := envelope.Lookup(hs, idKey)
		code, _ := envelope.Lookup(hs, envelope.ErrorCode)
		id := string(idb)
		k, known := sent[id]
		if !known {
			continue // an earlier run's record
		}
		seen[id]++
		if seen[id] > 1 {
			res.duplicates++
			continue
		}
		key := outcome
		if len(code) > 0 {
			key += "/" + string(code)
		}
		res.byCode[key]++
		if res.byKind[k] == nil {
			res.byKind[k] = map[string]int{}
		}
		res.byKind[k][key]++
		if key != mix[k].expect {
			res.unexpected++
		}
		if outcome == "quarantined" && res.example == "" {
			res.example = id
		}
	}
	res.found = len(seen)
	res.missing = len(sent) - len(seen)
	return res, nil
}

func printTable(o options, m map[string]float64, r outcomes, took time.Duration, exitErr error) {
	fmt.Printf("\nrelay demo: %s -> %s.valid | .rejected | .quarantine\n\n", o.source, o.source)
	fmt.Println("  by kind of record sent                         outcome/code (read_committed)")
	for k, kd := range mix {
		var parts []string
		for key, n := range r.byKind[k] {
			parts = append(parts, fmt.Sprintf("%s ×%d", key, n))
		}
		sort.Strings(parts)
		fmt.Printf("  %-46s %s\n", kd.name, strings.Join(parts, ", "))
	}
	fmt.Println("\n  by outcome and code")
	keys := make([]string, 0, len(r.byCode))
	for k := range r.byCode {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  %-46s %d\n", k, r.byCode[k])
	}
	const lat = "relay_commit_duration_seconds"
	mean := math.NaN()
	if n := m[lat+"_count"]; n > 0 {
		mean = m[lat+"_sum"] / n
	}
	exit := "0 (graceful)"
	if exitErr != nil {
		exit = exitErr.Error()
	}
	fmt.Printf(`
  records in                  %d
  in exactly one end state    %d  (missing %d, duplicated %d, not where expected %d)
  tier hops (retries + key followers) %.0f
  transactions committed      %.0f  (aborted %.0f)
  commit latency mean         %s  (p99 <= %s)
  wall time                   %s  (%.0f records/s end to end)
  relay exit                  %s
`, len(r.byCode)+sumValues(r.byCode)-len(r.byCode)+r.missing, r.found, r.missing, r.duplicates, r.unexpected,
		retryHops(m), m["relay_transactions_committed_total"], m["relay_transactions_aborted_total"],
		secs(mean), secs(quantile(m, lat, .99)),
		took.Round(time.Millisecond), float64(r.found)/took.Seconds(), exit)
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// retryHops reads the committed retry outcomes from relay's metrics.
func retryHops(m map[string]float64) float64 {
	return m["relay_records_outcome_total|retry"]
}
