package integration

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
)

// olderMember joins group as a relay from before announcements does: its
// consumer's client.id is relay's default, and it writes no member record.
// It subscribes to a topic of its own, so relay keeps every source
// partition; what matters is that the group coordinator lists it. Close
// leaves the group at once (a dynamic member).
func olderMember(t *testing.T, group string) (leave func()) {
	t.Helper()
	topic := uniq(t, "older-member")
	createTopics(t, 1, topic)
	return joinAsOlder(t, group, "", topic)
}

// joinAsOlder is a member of group without a record, subscribed to topic,
// static when instance is set; leave closes it (once).
func joinAsOlder(t *testing.T, group, instance, topic string) (leave func()) {
	t.Helper()
	conf := kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": group, "client.id": "relay-consumer",
		"enable.auto.commit": false, "session.timeout.ms": 6000}
	if instance != "" {
		conf["group.instance.id"] = instance
	}
	c, err := kafka.NewConsumer(&conf)
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

	// Off at once for new followers; A3 stays parked until parking has
	// been off for 30 s (a member that has just joined may not have
	// written its record yet), then it is copied.
	offs0 := strings.Count(r.stderr.String(), "feature off")
	olderMember(t, s.group)
	for deadline := time.Now().Add(30 * time.Second); strings.Count(r.stderr.String(), "feature off") == offs0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("relay did not turn parking off within 30 s of an older member joining")
		}
	}
	if _, p := committedWithParked(t, s.group, s.src.topic, 1); len(p[0].Offsets) != 1 {
		t.Fatalf("parked set %+v right after an older member joined, want A3 still parked", p[0])
	}
	a3 := fmt.Sprintf("%s/0/%d", s.src.topic, offs["A3"])
	for deadline := time.Now().Add(75 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if slices.ContainsFunc(readCommitted(t, s.tiers[0], 1), func(m *kafka.Message) bool { return envelopeOf(t, m).ID == a3 }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A3 not copied into %s within 75 s of an older member joining", s.tiers[0])
		}
	}
	waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
	if c, p := committedWithParked(t, s.group, s.src.topic, 1); c[0] != offs["A3"]+1 || len(p[0].Offsets) != 0 {
		t.Fatalf("committed offset %d with parked set %+v once an older member joined again, want %d and none", c[0], p[0], offs["A3"]+1)
	}

	h.setFailing("A1", false)
	if got := waitOutput(t, s, 0, 3, 60*time.Second); fmt.Sprint(got) != "[A1 A2 A3]" {
		t.Fatalf("output %v, want [A1 A2 A3]", got)
	}
	waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
	assertAuditClean(t, s)
}

// TestParkingSurvivesARestart: a member of a group that parks is killed
// and restarted at its group.instance.id (a static member: no rebalance,
// a new member id). Until the others have read its new record, parking is
// off for new followers only: nothing parked is copied into a tier, in
// the restarted member (which keeps its parked set again) or in the other,
// for longer than parking takes to be withdrawn (30 s).
func TestParkingSurvivesARestart(t *testing.T) {
	o := registerOrders(t)
	h := newOrderHook(t)
	h.setFailing("A1", true)
	h.setFailing("C1", true)
	s := keyScenario(t, o, h, 2, "RELAY_RETRY_TIERS", "1s", "RELAY_RETRY_MAX_ATTEMPTS", "100")
	ta, tb := uniq(t, "txn-a"), uniq(t, "txn-b")
	ra := startRelay(t, "relay-a", s.env(ta))
	defer ra.stop()
	rb := startRelay(t, "relay-b", s.env(tb))
	ra.waitLog("partitions assigned", 60*time.Second)
	rb.waitLog("partitions assigned", 60*time.Second)
	ra.waitParking()
	rb.waitParking()
	followers := map[string]string{}
	for p, key := range []string{"A", "C"} {
		produceOrder(t, o, s.src.topic, int32(p), key, key+"1")
	}
	for h.callsOf("A1") < 1 || h.callsOf("C1") < 1 {
		time.Sleep(50 * time.Millisecond)
	}
	for p, key := range []string{"A", "C"} {
		followers[key+"2"] = envelope.ID(s.src.topic, int32(p), produceOrder(t, o, s.src.topic, int32(p), key, key+"2"))
	}
	waitCaughtUp(t, s.group, s.src.topic, 2, 30*time.Second)
	assertFollowersParked := func(when string) {
		t.Helper()
		_, p := committedWithParked(t, s.group, s.src.topic, 2)
		if len(p[0].Offsets) != 1 || len(p[1].Offsets) != 1 {
			t.Fatalf("parked sets %s: %+v, want A2 and C2 parked", when, p)
		}
		for _, tier := range s.tiers {
			for _, m := range readCommitted(t, tier, s.partitions) {
				if id := envelopeOf(t, m).ID; id == followers["A2"] || id == followers["C2"] {
					t.Fatalf("%s: %s was copied into %s; it should wait parked", when, id, tier)
				}
			}
		}
	}
	assertFollowersParked("before the restart")
	rb.signal(syscall.SIGKILL)
	rb.wait(10 * time.Second)
	rb2 := startRelay(t, "relay-b-again", s.env(tb))
	defer rb2.stop()
	rb2.waitLog("partitions assigned", 60*time.Second)
	time.Sleep(35 * time.Second)
	assertFollowersParked("35 s after one member's restart")
	ra.waitParking()
	rb2.waitParking()

	h.setFailing("A1", false)
	h.setFailing("C1", false)
	if got := waitOutput(t, s, 0, 2, 60*time.Second); fmt.Sprint(got) != "[A1 A2]" {
		t.Fatalf("partition 0 output %v, want [A1 A2]", got)
	}
	if got := waitOutput(t, s, 1, 2, 60*time.Second); fmt.Sprint(got) != "[C1 C2]" {
		t.Fatalf("partition 1 output %v, want [C1 C2]", got)
	}
	waitCaughtUp(t, s.group, s.src.topic, 2, 30*time.Second)
	assertAuditClean(t, s)
}

// TestParkingOffWhenAnOlderMemberTakesAPlace: a member without a record
// (an older relay) takes a parking member's place at its
// group.instance.id, as a rollback of one pod without the procedure
// would. The group coordinator gives it a new member id and keeps the
// first join's client.id, so only the records tell: the other member
// turns parking off.
func TestParkingOffWhenAnOlderMemberTakesAPlace(t *testing.T) {
	o := registerOrders(t)
	h := newOrderHook(t)
	s := keyScenario(t, o, h, 2)
	t1, t2 := uniq(t, "txn-1"), uniq(t, "txn-2")
	r1 := startRelay(t, "relay-1", s.env(t1))
	r2 := startRelay(t, "relay-2", s.env(t2))
	defer r2.stop()
	r1.waitLog("partitions assigned", 60*time.Second)
	r2.waitLog("partitions assigned", 60*time.Second)
	r1.waitParking()
	r2.waitParking()
	r1.stop()
	before := len(r2.stderr.String())
	joinAsOlder(t, s.group, t1, s.src.topic)
	// Off, naming the member at t1, and still off a while later (not the
	// moment before a record is read).
	since := func() string { return r2.stderr.String()[before:] }
	deadline := time.Now().Add(40 * time.Second)
	for !strings.Contains(since(), "feature off: members of the group do not announce it") {
		if time.Now().After(deadline) {
			t.Fatalf("relay-2 still parks with a member without a record at %s:\n%s", t1, tail(since(), 10))
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(5 * time.Second)
	log := since()
	if off, on := strings.LastIndex(log, "feature off"), strings.LastIndex(log, "feature in force"); on > off || !strings.Contains(log[off:], t1) {
		t.Fatalf("relay-2 did not keep parking off, naming %s:\n%s", t1, tail(log, 10))
	}
}

// waitMemberRecord waits until the state topic holds r's member record:
// r has joined its group and announced itself (its record names its
// group.instance.id, its transactional id).
func waitMemberRecord(t *testing.T, s *scenario, r *relay) {
	t.Helper()
	r.waitLog(`"transactional_id":"`, 60*time.Second)
	_, rest, _ := strings.Cut(r.stderr.String(), `"transactional_id":"`)
	id, _, _ := strings.Cut(rest, `"`)
	want := `"instance":"` + id + `"`
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, m := range readCommitted(t, s.stateTopic(), 1) {
			if strings.HasPrefix(string(m.Key), "member|") && strings.Contains(string(m.Value), want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no member record with %s in %s within 60s", want, s.stateTopic())
		}
		time.Sleep(500 * time.Millisecond)
	}
}
