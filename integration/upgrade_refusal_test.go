package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// TestNewerParkedSetStopsRelay: a partition committed with a parked set
// of a later format than this relay reads (relay.park.2:, as a newer relay
// would write it) stops relay at the partition's assignment, exit 1, with
// an error naming the offset and both versions — a rollback onto data it
// does not understand fails loudly. Reading on would have taken the
// metadata for "nothing parked" and handled the records above the
// committed offset again. Nothing is written and the commit stays.
func TestNewerParkedSetStopsRelay(t *testing.T) {
	o := registerOrders(t)
	h := newOrderHook(t)
	s := keyScenario(t, o, h, 1)
	for _, id := range []string{"A1", "A2", "A3"} {
		produceOrder(t, o, s.src.topic, 0, "A", id)
	}
	const newer = "relay.park.2:AAAA"
	commitWithMetadata(t, s.group, s.src.topic, 0, 1, newer)

	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	if code := r.wait(90 * time.Second); code != 1 {
		t.Fatalf("relay on a parked set of format 2 exited %d, want 1", code)
	}
	if log := r.stderr.String(); !strings.Contains(log, "the parked set committed with offset 1 has format version 2, written by a newer relay") ||
		!strings.Contains(log, "reads up to version 1") {
		t.Fatalf("relay's stop does not name the parked set and both versions:\n%s", tail(log, 20))
	}
	if got := outputOrder(t, s, 0); len(got) != 0 {
		t.Fatalf("output %v, want nothing written", got)
	}
	// Read as it is: the harness's committed() decodes the parked set,
	// and refuses this one as relay does.
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": s.group, "isolation.level": "read_committed"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	topic := s.src.topic
	res, err := c.Committed([]kafka.TopicPartition{{Topic: &topic, Partition: 0}}, 10000)
	if err != nil || len(res) != 1 || res[0].Offset != 1 || res[0].Metadata == nil || *res[0].Metadata != newer {
		t.Fatalf("committed %v (%v), want offset 1 with %q, unchanged", res, err, newer)
	}
}

// commitWithMetadata commits the group's offset of topic's partition p at
// off with metadata, as another committer would (the group must be empty).
func commitWithMetadata(t *testing.T, group, topic string, p int32, off int64, metadata string) {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": false})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.CommitOffsets([]kafka.TopicPartition{{Topic: &topic, Partition: p, Offset: kafka.Offset(off), Metadata: &metadata}}); err != nil {
		t.Fatalf("commit %s[%d] at %d with metadata for %s: %v", topic, p, off, group, err)
	}
}
