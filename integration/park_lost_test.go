package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"relay/internal/audit"
)

// TestParkedRecordsDeletedFromTheSource: A1 keeps failing while A2 and A3
// are parked behind it, B1 between them processed. With relay stopped,
// DeleteRecords trims the source up to A3: the next instance reads A3
// first, finds A2 gone and passes over it (key A goes on without it, the
// commit no longer stops at it). A4 is parked too; with relay stopped
// again, the source is trimmed to its end: the third instance reads
// nothing, and finds A3 and A4 gone from the log's start alone. Once A1
// passes, the output is B1 then A1, each once; the commit stands at the
// end with nothing parked; relay_key_park_lost_total counts them; and
// relay audit says the deleted records are unverifiable, never lost.
func TestParkedRecordsDeletedFromTheSource(t *testing.T) {
	o := registerOrders(t)
	h := newOrderHook(t)
	h.setFailing("A1", true)
	s := keyScenario(t, o, h, 1)
	offs := map[string]int64{}
	produce := func(ids ...string) {
		for _, id := range ids {
			offs[id] = produceOrder(t, o, s.src.topic, 0, id[:1], id)
		}
	}
	r1 := startRelay(t, "relay-1", s.env(uniq(t, "txn-1")))
	r1.waitLog("partitions assigned", 60*time.Second)
	r1.waitParking()
	produce("A1", "A2", "B1", "A3")
	waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
	if c := committed(t, s.group, s.src.topic, 1)[0]; c != offs["A2"] {
		r1.stop()
		t.Fatalf("committed offset %d with A2 and A3 parked, want A2's, %d", c, offs["A2"])
	}
	r1.stop()
	deleteRecords(t, s.src.topic, 0, offs["A3"])

	addr := freeAddr(t)
	r2 := startRelay(t, "relay-2", s.env(uniq(t, "txn-2"), "RELAY_HTTP_ADDR", addr))
	r2.waitLog("a parked record is gone from its source partition", 60*time.Second)
	r2.waitParking()
	produce("A4")
	waitCommitted(t, s, offs["A3"])
	waitMetricAtLeast(t, addr, "relay_key_park_lost_total", 1, 60*time.Second)
	r2.stop()
	if n := strings.Count(r2.stderr.String(), "a parked record is gone"); n != 1 {
		t.Fatalf("relay-2 logged %d records gone, want 1 (A2)", n)
	}
	assertNotInTiers(t, s, "A3", offs["A3"], "A4", offs["A4"])
	deleteRecords(t, s.src.topic, 0, offs["A4"]+1)

	addr = freeAddr(t)
	r3 := startRelay(t, "relay-3", s.env(uniq(t, "txn-3"), "RELAY_HTTP_ADDR", addr))
	defer r3.stop()
	waitMetricAtLeast(t, addr, "relay_key_park_lost_total", 2, 60*time.Second)
	h.setFailing("A1", false)
	waitOutput(t, s, 0, 2, 60*time.Second)
	waitCommitted(t, s, offs["A4"]+1)
	r3.stop()
	if got := outputOrder(t, s, 0); fmt.Sprint(got) != "[B1 A1]" {
		t.Fatalf("output %v, want [B1 A1]", got)
	}
	if c, parked := committedWithParked(t, s.group, s.src.topic, 1); c[0] != offs["A4"]+1 || len(parked[0].Offsets) != 0 {
		t.Fatalf("committed %d %+v at the end, want %d and nothing parked", c[0], parked[0], offs["A4"]+1)
	}
	// An audit from the offsets relay passed over cannot say what
	// became of them: unverifiable, not lost.
	rep, res := auditOf(t, s, "--from-offsets", fmt.Sprintf("0:%d", offs["A2"]))
	pr := rep.Partitions[0]
	if res.code != 0 || pr.Lost != 0 || pr.Parked != 0 || pr.Unverifiable != offs["A4"]+1-offs["A2"] ||
		!findingAt(rep, audit.KindUnverifiable, fmt.Sprintf("%s/0/%d", s.src.topic, offs["A2"]), "") {
		t.Fatalf("relay audit: exit %d, partition 0 %+v, findings %v; want A2, A3 and A4 unverifiable, nothing lost or parked", res.code, pr, rep.Findings)
	}
}

// waitCommitted waits until the group's committed offset of source
// partition 0 reaches at least off.
func waitCommitted(t *testing.T, s *scenario, off int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for committed(t, s.group, s.src.topic, 1)[0] < off {
		if time.Now().After(deadline) {
			t.Fatalf("committed offset of %s/0 below %d after 60 s", s.src.topic, off)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
