package integration

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// previousRelay starts the previous release's relay (make test-upgrade
// builds it from the repository's history) as startRelay starts this
// tree's.
func previousRelay(t *testing.T, name string, env map[string]string) *relay {
	t.Helper()
	return startRelayCmd(t, name, exec.Command(os.Getenv("RELAY_TEST_PREVIOUS_BIN"), "run"), env)
}

// TestUpgradeRollsWithKeysInFlight: two instances of one version relay
// two partitions with key ordering, at relay's parking defaults, while
// A1's hook call keeps failing, so A2 and A3 wait behind it. They are
// replaced one by one by the other version — the first by SIGTERM, the
// second by SIGKILL — while more records arrive, so for a while the group
// holds both versions, and each takes over the other's partitions and
// blocked keys. Once A1 passes, every record is in the output once, each
// key in its source order, and the audit is clean.
//
// Upgrade: the previous release, then this tree's. While a previous
// member is in the group, nothing is parked (no committed offset carries
// a parked set); once the last one has left, parking turns on by itself
// and A5 is parked. Rollback: this tree's, then the previous release, by
// the RUNBOOK's procedure: parking turned off first by a rolling restart
// with RELAY_KEY_PARK_MAX_RECORDS=0 (the first such member turns it off
// for the whole group), then relay audit's drain gate (no record parked
// on any partition), then the change of version.
func TestUpgradeRollsWithKeysInFlight(t *testing.T) {
	if os.Getenv("RELAY_TEST_PREVIOUS_BIN") == "" {
		t.Skip("needs the previous release's relay: make test-upgrade")
	}
	t.Run("upgrade", func(t *testing.T) { rollVersions(t, previousRelay, startRelay, false) })
	t.Run("rollback", func(t *testing.T) { rollVersions(t, startRelay, previousRelay, true) })
}

// rollVersions is TestUpgradeRollsWithKeysInFlight from the version that
// from starts to the one that to starts; rollback: from parks, and the
// RUNBOOK's rollback procedure comes first.
func rollVersions(t *testing.T, from, to func(*testing.T, string, map[string]string) *relay, rollback bool) {
	o := registerOrders(t)
	h := newOrderHook(t)
	h.setFailing("A1", true)
	// relay's parking defaults (keyScenario sets the default's value;
	// the previous release does not know the variable).
	s := keyScenario(t, o, h, 2)
	offs := map[string]int64{}
	produce := func(p int32, ids ...string) {
		for _, id := range ids {
			offs[id] = produceOrder(t, o, s.src.topic, p, id[:1], id)
		}
	}
	txn1, txn2 := uniq(t, "txn-1"), uniq(t, "txn-2")
	old1 := from(t, "from-1", s.env(txn1))
	old2 := from(t, "from-2", s.env(txn2))
	if rollback {
		old1.waitLog("partitions assigned", 60*time.Second)
		old2.waitLog("partitions assigned", 60*time.Second)
		old1.waitParking()
		old2.waitParking()
	}
	produce(0, "A1", "A2", "A3", "B1")
	produce(1, "C1", "C2")
	waitCaughtUp(t, s.group, s.src.topic, 2, 60*time.Second)
	for h.callsOf("A1") < 2 {
		time.Sleep(100 * time.Millisecond)
	}
	if rollback {
		if _, p := committedWithParked(t, s.group, s.src.topic, 2); !slices.Equal(p[0].Offsets, []int64{offs["A2"], offs["A3"]}) {
			t.Fatalf("parked set of partition 0 before the rollback: %+v, want A2 and A3 (%d, %d)", p[0], offs["A2"], offs["A3"])
		}
		// The procedure: parking off by a rolling restart (each with its
		// own group.instance.id, so no rebalance: the others see it by
		// looking at the group), then the drain gate.
		old1.stop()
		old1 = from(t, "from-1-nopark", s.env(txn1, "RELAY_KEY_PARK_MAX_RECORDS", "0"))
		old2.waitLog("feature off: members of the group do not announce it", 60*time.Second)
		old2.stop()
		old2 = from(t, "from-2-nopark", s.env(txn2, "RELAY_KEY_PARK_MAX_RECORDS", "0"))
		waitDrained(t, s, 60*time.Second)
	}

	// The first instance stops; one of the other version joins: two
	// versions in the group, each with one partition.
	old1.stop()
	new1 := to(t, "to-1", s.env(uniq(t, "txn-3")))
	new1.waitLog("partitions assigned", 60*time.Second)
	produce(0, "A4", "B2")
	produce(1, "C3")
	waitCaughtUp(t, s.group, s.src.topic, 2, 60*time.Second)
	if _, p := committedWithParked(t, s.group, s.src.topic, 2); len(p[0].Offsets)+len(p[1].Offsets) != 0 {
		t.Fatalf("parked sets %+v while the versions were mixed, want none", p)
	}

	// The second is killed; the next of the other version takes its place.
	old2.signal(syscall.SIGKILL)
	old2.wait(10 * time.Second)
	new2 := to(t, "to-2", s.env(uniq(t, "txn-4")))
	new2.waitLog("partitions assigned", 60*time.Second)
	if !rollback {
		// The last previous member has left: parking turns on by itself,
		// in each member.
		new1.waitParking()
		new2.waitParking()
	}
	produce(0, "A5")
	produce(1, "C4")
	waitCaughtUp(t, s.group, s.src.topic, 2, 60*time.Second)
	if _, p := committedWithParked(t, s.group, s.src.topic, 2); !rollback && !slices.Contains(p[0].Offsets, offs["A5"]) {
		t.Fatalf("parked set of partition 0 once every member is this version: %+v, want A5 (%d) parked", p[0], offs["A5"])
	}
	if got := outputOrder(t, s, 0); slices.Contains(got, "A2") {
		t.Fatalf("A2 overtook A1 while the versions were mixed: output %v", got)
	}

	h.setFailing("A1", false)
	p0 := waitOutput(t, s, 0, 7, 90*time.Second)
	p1 := waitOutput(t, s, 1, 4, 30*time.Second)
	waitCaughtUp(t, s.group, s.src.topic, 2, 60*time.Second)
	new1.stop()
	new2.stop()
	for key, want := range map[string][]string{"A": {"A1", "A2", "A3", "A4", "A5"}, "B": {"B1", "B2"}, "C": {"C1", "C2", "C3", "C4"}} {
		var got []string
		for _, id := range append(slices.Clone(p0), p1...) {
			if id[:1] == key {
				got = append(got, id)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("key %s in the output: %v, want %v (each once, in source order)", key, got, want)
		}
	}
	if rep, res := auditOf(t, s); res.code != 0 || !rep.Clean {
		t.Fatalf("relay audit after the change of version: exit %d, clean %v, findings %v", res.code, rep.Clean, rep.Findings)
	}
}

// waitDrained is the rollback's drain gate as the RUNBOOK gives it: relay
// audit counts no parked record on any partition of the source.
func waitDrained(t *testing.T, s *scenario, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		rep, _ := auditOf(t, s)
		parked := int64(0)
		for _, p := range rep.Partitions {
			parked += p.Parked
		}
		if parked == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records still parked after %s: %+v", parked, d, rep.Partitions)
		}
		time.Sleep(2 * time.Second)
	}
}
