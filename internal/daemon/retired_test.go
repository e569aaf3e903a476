package daemon

import (
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/envelope"
)

// A retired tier stands for the configured tier whose delay is the
// longest not above its own, so a record from it goes on to longer waits.
func TestTierFor(t *testing.T) {
	tiers := []config.Tier{{Delay: 2 * time.Second}, {Delay: time.Minute}, {Delay: time.Hour}}
	for _, c := range []struct {
		delay time.Duration
		want  int
	}{{time.Second, 0}, {2 * time.Second, 0}, {30 * time.Second, 0}, {5 * time.Minute, 1}, {2 * time.Hour, 2}, {0, 2}} {
		if got := tierFor(c.delay, tiers); got != c.want {
			t.Errorf("tierFor(%s) = %d, want %d", c.delay, got, c.want)
		}
	}
	if got := tierFor(time.Minute, nil); got != 0 {
		t.Errorf("no tiers: %d", got)
	}
}

// A retired tier's records of another group (groups can share tier topic
// names) are not this group's to wait for.
func TestOtherGroup(t *testing.T) {
	hs := func(g string) []kafka.Header {
		return []kafka.Header{{Key: "app", Value: []byte("x")}, {Key: envelope.ConsumerGroup, Value: []byte(g)}}
	}
	if otherGroup(hs("relay"), "relay") || !otherGroup(hs("billing"), "relay") || otherGroup(nil, "relay") {
		t.Fatal("otherGroup")
	}
}
