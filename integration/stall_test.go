package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// TestPartitionsAddedToSourceMidRun pins a record loss: records of a source
// partition that its output topics do not have cannot be written, and the
// first such record of a transaction used to be skipped and committed past.
// Partitions are added to the source while relay runs; relay must hold back
// what it cannot write (saying so in its log and in relay_partitions_stalled),
// keep the old partitions flowing, and resume by itself once the operator
// has given every derived topic the new partitions — with every record
// output exactly once over the whole run.
func TestPartitionsAddedToSourceMidRun(t *testing.T) {
	const before, after = 2, 4
	s := newScenario(t, before)
	s.src.produce(t, 400)
	addr := freeAddr(t)
	r := startRelay(t, "relay", s.env(uniq(t, "txn"),
		"RELAY_HTTP_ADDR", addr,
		// Notice the new partitions in a second, not librdkafka's 5 minutes.
		"RELAY_KAFKA_TOPIC_METADATA_REFRESH_INTERVAL_MS", "1000"))
	r.waitLog("partitions assigned", 60*time.Second)
	waitCaughtUp(t, s.group, s.src.topic, before, time.Minute)

	addPartitions(t, s.src.topic, after)
	waitTopics(t, after, s.src.topic)
	s.src.produce(t, 800) // keys spread over all four partitions
	r.waitLog("cannot be written", 60*time.Second)
	waitMetricAtLeast(t, addr, "relay_partitions_stalled", 1, 30*time.Second)

	// The old partitions go on while the new ones wait.
	s.src.produce(t, 200)
	deadline := time.Now().Add(time.Minute)
	for {
		c, end := committed(t, s.group, s.src.topic, after), endOffsets(t, s.src.topic, after)
		if c[0] == end[0] && c[1] == end[1] {
			if c[2] >= end[2] && c[3] >= end[3] {
				t.Fatalf("new partitions committed (%v of %v) before their outputs had them", c, end)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("old partitions stopped while new ones were stalled: committed %v, end %v", c, end)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The operator adds the partitions to every derived topic.
	applyTopics(t, after, s.env("unused"), s.output)
	assertExactlyOnce(t, s.src, s.output, s.group, after)
	waitMetricAtLeast(t, addr, "relay_partitions_stalled", 0, 30*time.Second)
	if v, _ := scrapeMetric(addr, "relay_partitions_stalled", ""); v != 0 {
		t.Errorf("relay_partitions_stalled = %v after the stall ended, want 0", v)
	}
	if r.exited() {
		t.Fatalf("relay exited (code %d); it must wait and resume", r.cmd.ProcessState.ExitCode())
	}
	r.stop()
}

func addPartitions(t *testing.T, topic string, total int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := admin(t).CreatePartitions(ctx, []kafka.PartitionsSpecification{{Topic: topic, IncreaseTo: total}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			t.Fatalf("add partitions to %s: %v", r.Topic, r.Error)
		}
	}
}

// scrapeMetric reads from /metrics the first sample of name whose line
// holds label ("" for any).
func scrapeMetric(addr, name, label string) (float64, bool) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, line := range strings.Split(string(b), "\n") {
		if (strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ")) && strings.Contains(line, label) {
			v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// waitMetricAtLeast waits until the metric is at least min (exactly 0 when
// min is 0).
func waitMetricAtLeast(t *testing.T, addr, name string, min float64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		v, ok := scrapeMetric(addr, name, "")
		if ok && (v >= min && (min > 0 || v == 0)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v (found %v), want %v", name, v, ok, min)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestOutputTopicDeletedMidRun: the output topic is deleted while relay
// runs. Nothing can be written until it is back; relay must not skip a
// record nor exit, and once `relay topics apply` has created the topic again
// every record is output exactly once (what was output before the deletion
// went with the topic, so the check counts from the re-creation).
func TestOutputTopicDeletedMidRun(t *testing.T) {
	const partitions = 2
	s := newScenario(t, partitions)
	s.src.produce(t, 300)
	r := startRelay(t, "relay", s.env(uniq(t, "txn"),
		// Fail writes to a missing topic after 2s, not librdkafka's 30s.
		"RELAY_KAFKA_TOPIC_METADATA_PROPAGATION_MAX_MS", "2000",
		"RELAY_KAFKA_TOPIC_METADATA_REFRESH_INTERVAL_MS", "1000"))
	r.waitLog("partitions assigned", 60*time.Second)
	waitCaughtUp(t, s.group, s.src.topic, partitions, time.Minute)
	before := committed(t, s.group, s.src.topic, partitions)

	deleteTopics(t, s.output)
	s.src.produce(t, 300)
	r.waitLog("cannot be written", 90*time.Second)
	if c := committed(t, s.group, s.src.topic, partitions); !equalOffsets(c, before) {
		t.Fatalf("committed %v while the output topic was gone, want it to stay at %v", c, before)
	}
	applyTopics(t, partitions, s.env("unused"), s.output)
	waitCaughtUp(t, s.group, s.src.topic, partitions, 2*time.Minute)
	outs := readCommitted(t, s.output, partitions)
	seen := map[string]int{}
	for _, m := range outs {
		for _, h := range m.Headers {
			if h.Key == "relay.message.id" {
				seen[string(h.Value)]++
			}
		}
	}
	for _, m := range readCommitted(t, s.src.topic, partitions) {
		if int64(m.TopicPartition.Offset) < before[m.TopicPartition.Partition] {
			continue // output before the deletion, gone with the topic
		}
		id := fmt.Sprintf("%s/%d/%d", s.src.topic, m.TopicPartition.Partition, m.TopicPartition.Offset)
		if seen[id] != 1 {
			t.Errorf("record %s output %d times after the topic came back, want 1", id, seen[id])
		}
	}
	if len(outs) != 300 {
		t.Errorf("%d outputs in the re-created topic, want 300", len(outs))
	}
	if r.exited() {
		t.Fatalf("relay exited (code %d) while its output topic was gone", r.cmd.ProcessState.ExitCode())
	}
	r.stop()
}

func deleteTopics(t *testing.T, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := admin(t).DeleteTopics(ctx, names)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			t.Fatalf("delete %s: %v", r.Topic, r.Error)
		}
	}
}
