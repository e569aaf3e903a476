package integration

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"
)

// TestTiersShrinkWithRecordsWaiting: with RELAY_RETRY_TIERS=1s,3s, A1
// keeps failing and sits in the 3s tier, with A2, its key's follower,
// behind it (copied into the tier, or parked). relay is stopped and
// started again with RELAY_RETRY_TIERS=1s, and A3 follows. Regression:
// the restored key state named tier 1, which no longer existed: relay
// panicked (index out of range) on A3, exiting 2 as for a bad
// configuration, on every restart; and the 3s topic was no longer read,
// so A1 and A2 were stranded. relay must read the retired topic until it
// is drained, and the key's order must hold: A1, A2, A3.
func TestTiersShrinkWithRecordsWaiting(t *testing.T) {
	for _, c := range []struct{ name, park string }{{"copied", "0"}, {"parked", "10000"}} {
		t.Run(c.name, func(t *testing.T) {
			o := registerOrders(t)
			h := newOrderHook(t)
			h.setFailing("A1", true)
			s := keyScenario(t, o, h, 1, "RELAY_RETRY_TIERS", "1s,3s", "RELAY_KEY_PARK_MAX_RECORDS", c.park)
			produceOrder(t, o, s.src.topic, 0, "A", "A1")
			r1 := startRelay(t, "relay-1", s.env(uniq(t, "txn-1")))
			if c.park != "0" {
				r1.waitParking()
			}
			for h.callsOf("A1") < 2 { // the second failure moves it to the 3s tier
				if r1.exited() {
					t.Fatal("relay-1 exited")
				}
				time.Sleep(100 * time.Millisecond)
			}
			a2 := produceOrder(t, o, s.src.topic, 0, "A", "A2")
			waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
			if c.park == "0" {
				waitInTier(t, s.tiers[1], s.src.topic+"/0/0", s.src.topic+"/0/1")
			} else {
				waitInTier(t, s.tiers[1], s.src.topic+"/0/0")
				assertNotInTiers(t, s, "A2", a2)
			}
			r1.stop()

			h.setFailing("A1", false)
			r2 := startRelay(t, "relay-2", s.env(uniq(t, "txn-2"), "RELAY_RETRY_TIERS", "1s"))
			r2.waitLog("partitions assigned", 60*time.Second)
			produceOrder(t, o, s.src.topic, 0, "A", "A3")
			got := waitOutput(t, s, 0, 3, 60*time.Second)
			if r2.exited() {
				t.Fatalf("relay-2 exited with %d", r2.cmd.ProcessState.ExitCode())
			}
			if fmt.Sprint(got) != "[A1 A2 A3]" {
				t.Fatalf("output %v, want [A1 A2 A3]", got)
			}
			waitTierDrained(t, s, s.tiers[1], time.Now().Add(30*time.Second))
			r2.stop()
			if !regexpMatch(`no longer configured still holds records.*`+s.tiers[1], r2.stderr.String()) {
				t.Errorf("relay-2 did not say it reads the retired tier %s", s.tiers[1])
			}
			for _, topic := range []string{s.quarantine, s.rejected} {
				if n := len(readCommitted(t, topic, 1)); n != 0 {
					t.Errorf("%d records in %s", n, topic)
				}
			}
			assertAuditClean(t, s)
		})
	}
}

// TestSwitchToPartitionReadsRetiredTiers: a record waits in a tier under
// key ordering; relay is started again with RELAY_ORDERING=partition,
// which has no tier topics. Regression: the tier was no longer read and
// the record never reached an end state. relay reads it as a retired tier;
// the record is processed, and so is a new one from the source, and the
// key state key ordering left is deleted.
func TestSwitchToPartitionReadsRetiredTiers(t *testing.T) {
	o := registerOrders(t)
	h := newOrderHook(t)
	h.setFailing("X", true)
	s := keyScenario(t, o, h, 1, "RELAY_RETRY_TIERS", "1s")
	produceOrder(t, o, s.src.topic, 0, "A", "X")
	r1 := startRelay(t, "relay-1", s.env(uniq(t, "txn-1")))
	waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
	waitInTier(t, s.tiers[0], s.src.topic+"/0/0")
	r1.stop()

	h.setFailing("X", false)
	r2 := startRelay(t, "relay-2", s.env(uniq(t, "txn-2"), "RELAY_ORDERING", "partition"))
	r2.waitLog("partitions assigned", 60*time.Second)
	produceOrder(t, o, s.src.topic, 0, "B", "Y")
	got := waitOutput(t, s, 0, 2, 60*time.Second)
	if fmt.Sprint(got) != "[X Y]" && fmt.Sprint(got) != "[Y X]" {
		t.Fatalf("output %v, want X and Y", got)
	}
	waitTierDrained(t, s, s.tiers[0], time.Now().Add(30*time.Second))
	r2.stop()
	for _, topic := range []string{s.quarantine, s.rejected} {
		if n := len(readCommitted(t, topic, 1)); n != 0 {
			t.Errorf("%d records in %s", n, topic)
		}
	}
	// Key ordering's state of key A is deleted: were key ordering turned
	// on again, new records of A must not wait for X, which is done.
	sk := "key|" + s.src.topic + "|0|" + base64.RawURLEncoding.EncodeToString([]byte("A"))
	var last []byte
	seen := false
	for _, m := range readCommitted(t, s.stateTopic(), 1) {
		if string(m.Key) == sk {
			last, seen = m.Value, true
		}
	}
	if !seen || last != nil {
		t.Errorf("state of key A: seen %v, last value %s; want a tombstone", seen, last)
	}
}

// waitInTier waits until tier holds a committed record of each failure id.
func waitInTier(t *testing.T, tier string, ids ...string) {
	t.Helper()
	waitInTiers(t, []string{tier}, ids...)
}

// waitInTiers waits until the tiers hold a committed record of each
// failure id, between them.
func waitInTiers(t *testing.T, tiers []string, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		seen := map[string]bool{}
		for _, tier := range tiers {
			for _, m := range readCommitted(t, tier, 1) {
				seen[envelopeOf(t, m).ID] = true
			}
		}
		missing := 0
		for _, id := range ids {
			if !seen[id] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v do not hold %v", tiers, ids)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
