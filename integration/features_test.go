package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// olderMember joins group as a relay from before announcements does: its
// consumer's client.id is relay's default and says nothing else. It
// subscribes to a topic of its own, so relay keeps every source partition;
// what matters is that the group coordinator lists it. Close leaves the
// group at once (a dynamic member).
func olderMember(t *testing.T, group string) (leave func()) {
	t.Helper()
	topic := uniq(t, "older-member")
	createTopics(t, 1, topic)
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": group, "client.id": "relay-consumer",
		"enable.auto.commit": false, "session.timeout.ms": 6000})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, nil); err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				c.Poll(100)
			}
		}
	}()
	var once bool
	leave = func() {
		if once {
			return
		}
		once = true
		close(stop)
		<-done
		_ = c.Close()
	}
	t.Cleanup(leave)
	return leave
}

// TestParkingWaitsForTheGroup: parking is in force only while every member
// of the group announces it. With a member that does not (an older relay)
// in the group, a follower is copied into its head's tier; once it leaves,
// relay parks on its own (no restart, no operator step); when it joins
// again, relay hands back what it parked, copies it into the tier, and its
// commit carries no parked set. The key's order and exactly once hold
// throughout, and the audit is clean.
func TestParkingWaitsForTheGroup(t *testing.T) {
	o := registerOrders(t)
	h := newOrderHook(t)
	h.setFailing("A1", true)
	s := keyScenario(t, o, h, 1, "RELAY_RETRY_TIERS", "1s", "RELAY_RETRY_MAX_ATTEMPTS", "100")
	leave := olderMember(t, s.group)
	addr := freeAddr(t)
	r := startRelay(t, "relay", s.env(uniq(t, "txn"), "RELAY_HTTP_ADDR", addr))
	defer r.stop()
	r.waitLog("feature off: members of the group do not announce it", 60*time.Second)
	if v, ok := scrapeMetric(addr, "relay_group_features", `feature="park"`); !ok || v != 0 {
		t.Fatalf("relay_group_features{feature=park} = %v (found %v) with an older member in the group, want 0", v, ok)
	}
	offs := map[string]int64{}
	produce := func(id string) { offs[id] = produceOrder(t, o, s.src.topic, 0, "A", id) }
	produce("A1")
	for h.callsOf("A1") < 1 {
		time.Sleep(50 * time.Millisecond)
	}
	produce("A2")
	waitInTier(t, s.tiers[0], fmt.Sprintf("%s/0/%d", s.src.topic, offs["A2"]))

	leave()
	r.waitParking()
	produce("A3")
	waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
	if c := committed(t, s.group, s.src.topic, 1)[0]; c != offs["A3"] {
		t.Fatalf("committed offset %d once the older member left, want A3's (%d): parked", c, offs["A3"])
	}
	assertNotInTiers(t, s, "A3", offs["A3"])
	if v, _ := scrapeMetric(addr, "relay_group_features", `feature="park"`); v != 1 {
		t.Fatalf("relay_group_features{feature=park} = %v once every member parks, want 1", v)
	}

	olderMember(t, s.group)
	waitInTier(t, s.tiers[0], fmt.Sprintf("%s/0/%d", s.src.topic, offs["A3"]))
	waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
	if c, p := committedWithParked(t, s.group, s.src.topic, 1); c[0] != offs["A3"]+1 || len(p[0].Offsets) != 0 {
		t.Fatalf("committed offset %d with parked set %+v once an older member joined again, want %d and none", c[0], p[0], offs["A3"]+1)
	}
	if log := r.stderr.String(); strings.Count(log, "feature off: members of the group do not announce it") < 2 {
		t.Fatalf("relay did not say parking went off again:\n%s", tail(log, 30))
	}

	h.setFailing("A1", false)
	if got := waitOutput(t, s, 0, 3, 60*time.Second); fmt.Sprint(got) != "[A1 A2 A3]" {
		t.Fatalf("output %v, want [A1 A2 A3]", got)
	}
	waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
	assertAuditClean(t, s)
}
