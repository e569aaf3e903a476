package audit

import (
	"errors"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/keyorder"
)

// The group's committed offsets are taken whole or not at all: the
// answer's error, a partition's error, or a parked set that cannot be
// read is no verdict; otherwise each offset (none: -1) and the source's
// parked set are kept.
func TestTakeCommitted(t *testing.T) {
	src, tier := "orders", "orders.retry.5s"
	md, err := keyorder.Encode(keyorder.Parked{Offsets: []int64{4, 6}, Hi: 8})
	if err != nil {
		t.Fatal(err)
	}
	bad := "relay.park.1:not"
	at := func(topic string, off int64, meta *string, e error) kafka.TopicPartition {
		return kafka.TopicPartition{Topic: &topic, Partition: 0, Offset: kafka.Offset(off), Metadata: meta, Error: e}
	}
	for _, c := range []struct {
		name, want string
		res        []kafka.TopicPartition
		err        error
	}{
		{"the answer's error", "coordinator", nil, errors.New("coordinator not available")},
		{"a partition's error", "unstable", []kafka.TopicPartition{at(src, 4, nil, nil), at(tier, 2, nil, errors.New("unstable offset commit"))}, nil},
		{"an unreadable parked set", "orders[0]", []kafka.TopicPartition{at(src, 4, &bad, nil)}, nil},
	} {
		s := testScan(t, nil)
		if err := s.takeCommitted(c.res, c.err); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
	s := testScan(t, nil)
	if err := s.takeCommitted([]kafka.TopicPartition{at(src, 4, &md, nil), at(tier, -1001, nil, nil)}, nil); err != nil {
		t.Fatal(err)
	}
	if pt := s.parts[0]; pt.committed != 4 || !pt.parked.Holds(6) || !pt.parked.Settled(5) || s.committed[tier][0] != -1 {
		t.Fatalf("committed %d, parked %+v, tier %d; want 4, {4 6; 8}, -1", pt.committed, pt.parked, s.committed[tier][0])
	}
}
