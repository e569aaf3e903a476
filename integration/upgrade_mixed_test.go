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
// two partitions with key ordering while A1's hook call keeps failing, so
// A2 and A3 wait behind it in the tiers. They are replaced one by one by
// the other version — the first by SIGTERM, the second by SIGKILL — while
// more records arrive, so for a while the group holds both versions, and
// each takes over the other's partitions and blocked keys. Once A1
// passes, every record is in the output once, each key in its source
// order, and the audit is clean. Upgrade: the previous release, then this
// tree's; rollback: the other way. Parking stays off (the previous release
// has none; a rollback past it is the RUNBOOK's procedure).
func TestUpgradeRollsWithKeysInFlight(t *testing.T) {
	if os.Getenv("RELAY_TEST_PREVIOUS_BIN") == "" {
		t.Skip("needs the previous release's relay: make test-upgrade")
	}
	t.Run("upgrade", func(t *testing.T) { rollVersions(t, previousRelay, startRelay) })
	t.Run("rollback", func(t *testing.T) { rollVersions(t, startRelay, previousRelay) })
}

// rollVersions is TestUpgradeRollsWithKeysInFlight from the version that
// from starts to the one that to starts.
func rollVersions(t *testing.T, from, to func(*testing.T, string, map[string]string) *relay) {
	o := registerOrders(t)
	h := newOrderHook(t)
	h.setFailing("A1", true)
	s := keyScenario(t, o, h, 2, "RELAY_KEY_PARK_MAX_RECORDS", "0")
	produce := func(p int32, ids ...string) {
		for _, id := range ids {
			produceOrder(t, o, s.src.topic, p, id[:1], id)
		}
	}
	produce(0, "A1", "A2", "A3", "B1")
	produce(1, "C1", "C2")
	old1 := from(t, "from-1", s.env(uniq(t, "txn-1")))
	old2 := from(t, "from-2", s.env(uniq(t, "txn-2")))
	waitCaughtUp(t, s.group, s.src.topic, 2, 60*time.Second)
	for h.callsOf("A1") < 2 {
		time.Sleep(100 * time.Millisecond)
	}

	// The first instance stops; one of the other version joins: two
	// versions in the group, each with one partition.
	old1.stop()
	new1 := to(t, "to-1", s.env(uniq(t, "txn-3")))
	new1.waitLog("partitions assigned", 60*time.Second)
	produce(0, "A4", "B2")
	produce(1, "C3")
	waitCaughtUp(t, s.group, s.src.topic, 2, 60*time.Second)

	// The second is killed; the next of the other version takes its place.
	old2.signal(syscall.SIGKILL)
	old2.wait(10 * time.Second)
	new2 := to(t, "to-2", s.env(uniq(t, "txn-4")))
	new2.waitLog("partitions assigned", 60*time.Second)
	produce(0, "A5")
	produce(1, "C4")
	waitCaughtUp(t, s.group, s.src.topic, 2, 60*time.Second)
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
