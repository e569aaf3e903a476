package integration

import (
	"context"
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
	if v, _ := scrapeMetric(addr, "relay_partitions_stalled"); v != 0 {
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

// scrapeMetric reads one unlabelled-by-us gauge or counter from /metrics.
func scrapeMetric(addr, name string) (float64, bool) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
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
		v, ok := scrapeMetric(addr, name)
		if ok && (v >= min && (min > 0 || v == 0)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v (found %v), want %v", name, v, ok, min)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
