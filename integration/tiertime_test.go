package integration

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// TestOldRecordThroughTiers: a source record whose timestamp is older than
// the tier topics' retention fails twice, so it hops through both tiers,
// and is then processed. Regression: a tier hop kept the source timestamp,
// so the tier's retention counted from the source time and such a record
// could be deleted from the tier before relay read it back. Each tier
// record must carry its hop's time (with the source time in
// relay.source.timestamp), and the output the source record's timestamp.
func TestOldRecordThroughTiers(t *testing.T) {
	o := registerOrders(t)
	h := newOrderHook(t)
	h.setFailing("OLD", true)
	s := keyScenario(t, o, h, 1)
	retention := topicRetention(t, s.tiers[0])
	born := time.Now().Add(-retention - 48*time.Hour).Truncate(time.Millisecond)
	start := time.Now().Truncate(time.Millisecond)
	deliver(t, []*kafka.Message{{
		TopicPartition: kafka.TopicPartition{Topic: &s.src.topic, Partition: 0}, Key: []byte("A"), Timestamp: born,
		Value: o.value(t, 3, map[string]any{"id": "OLD", "amount": int64(1), "currency": "EUR"}),
	}})
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	// The first attempt sends it to the first tier, the second to the
	// second: two hops, the second from a tier record.
	for h.callsOf("OLD") < 3 {
		if r.exited() {
			t.Fatal("relay exited")
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.setFailing("OLD", false)
	got := waitOutput(t, s, 0, 1, 60*time.Second)
	waitSettled(t, s, 60*time.Second)
	r.stop()
	if len(got) != 1 || got[0] != "OLD" {
		t.Fatalf("output %v, want [OLD]", got)
	}
	out := readCommitted(t, s.output, 1)
	if !out[0].Timestamp.Equal(born) {
		t.Errorf("output timestamp %v, want the source's %v", out[0].Timestamp, born)
	}
	hops := 0
	for _, topic := range s.tiers {
		for _, m := range readCommitted(t, topic, 1) {
			hops++
			f := envelopeOf(t, m)
			if m.Timestamp.Before(start) {
				t.Errorf("%s record at %d has timestamp %v, before the run started (%v): the tier's retention would count from it",
					topic, m.TopicPartition.Offset, m.Timestamp, start)
			}
			if !f.SourceTimestamp.Equal(born) || !f.RecordTimestamp.Equal(born) {
				t.Errorf("%s record at %d: relay.source.timestamp %v, relay.record.timestamp %v, want %v",
					topic, m.TopicPartition.Offset, f.SourceTimestamp, f.RecordTimestamp, born)
			}
		}
	}
	if hops < 2 {
		t.Fatalf("%d tier records, want at least 2 hops", hops)
	}
	for _, topic := range []string{s.quarantine, s.rejected} {
		if n := len(readCommitted(t, topic, 1)); n != 0 {
			t.Errorf("%d records in %s", n, topic)
		}
	}
}

// topicRetention reads a topic's retention.ms.
func topicRetention(t *testing.T, topic string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := admin(t).DescribeConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceTopic, Name: topic}})
	if err != nil || len(res) != 1 || res[0].Error.Code() != kafka.ErrNoError {
		t.Fatalf("describe %s: %v %v", topic, err, res)
	}
	ms, err := strconv.ParseInt(res[0].Config["retention.ms"].Value, 10, 64)
	if err != nil || ms <= 0 {
		t.Fatalf("%s retention.ms %q", topic, res[0].Config["retention.ms"].Value)
	}
	return time.Duration(ms) * time.Millisecond
}
