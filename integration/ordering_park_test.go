package integration

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// TestKeyParkingRollOut rolls key ordering from copying to parking with
// followers in the tiers, kills the parking instance with followers
// parked, and forces the fallback with a tiny limit:
//
//   - relay-1 copies (RELAY_KEY_PARK_MAX_RECORDS=0): A2 and A3 follow the
//     failing A1 into the tiers;
//   - relay-2 parks (up to 10,000 records): A4 and A5 wait in memory behind A2 and
//     A3, and nothing of them is written to a tier; it is killed;
//   - relay-3 parks at most one record: it reads A4 and A5 again from the
//     source (parked still), so A6 and A7 are copied into the tier.
//
// Once A1 passes, the output is B1, then A1 to A7 in order, each once;
// relay audit counts A4 and A5 as parked while they are, and finds
// everything done at the end.
func TestKeyParkingRollOut(t *testing.T) {
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
	produce("A1", "A2", "A3", "B1")
	r1 := startRelay(t, "relay-1", s.env(uniq(t, "txn-1"), "RELAY_KEY_PARK_MAX_RECORDS", "0"))
	waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
	waitInTier(t, s.tiers[0], s.src.topic+"/0/1", s.src.topic+"/0/2")
	r1.stop()

	r2 := startRelay(t, "relay-2", s.env(uniq(t, "txn-2")))
	r2.waitLog("partitions assigned", 60*time.Second)
	r2.waitParking() // once relay-1, which does not park, has left the group
	produce("A4", "A5")
	waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
	if c := committed(t, s.group, s.src.topic, 1)[0]; c != offs["A4"] {
		t.Fatalf("committed offset %d with A4 and A5 parked, want A4's, %d", c, offs["A4"])
	}
	for h.callsOf("A1") < 3 {
		time.Sleep(100 * time.Millisecond)
	}
	r2.signal(syscall.SIGKILL)
	r2.wait(10 * time.Second)
	assertNotInTiers(t, s, "A4", offs["A4"], "A5", offs["A5"])
	// relay audit counts the parked records as in flight, and the record
	// settled between the committed offset and them (none here: B1 is
	// below) as done.
	rep, res := auditOf(t, s)
	if pr := rep.Partitions[0]; res.code != 0 || !rep.Clean || pr.Parked != 2 || pr.InTier != 3 || pr.Processed != 1 || pr.Behind != 0 {
		t.Fatalf("relay audit with A4 and A5 parked: exit %d, clean %v, partition 0 %+v, findings %v", res.code, rep.Clean, pr, rep.Findings)
	}

	r3 := startRelay(t, "relay-3", s.env(uniq(t, "txn-3"), "RELAY_KEY_PARK_MAX_RECORDS", "1"))
	r3.waitLog("partitions assigned", 60*time.Second)
	produce("A6", "A7")
	waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
	waitInTiers(t, s.tiers, fmt.Sprintf("%s/0/%d", s.src.topic, offs["A6"]), fmt.Sprintf("%s/0/%d", s.src.topic, offs["A7"]))
	if got := outputOrder(t, s, 0); fmt.Sprint(got) != "[B1]" {
		t.Fatalf("before A1 passes the output is %v, want [B1]", got)
	}
	h.setFailing("A1", false)
	want := "[B1 A1 A2 A3 A4 A5 A6 A7]"
	waitOutput(t, s, 0, 8, 60*time.Second)
	waitCaughtUp(t, s.group, s.src.topic, 1, 30*time.Second)
	r3.stop()
	if got := outputOrder(t, s, 0); fmt.Sprint(got) != want {
		t.Fatalf("output %v, want %s", got, want)
	}
	if c := committed(t, s.group, s.src.topic, 1)[0]; c != offs["A7"]+1 {
		t.Fatalf("committed offset %d at the end, want %d: nothing parked", c, offs["A7"]+1)
	}
	assertAuditClean(t, s)
}

// assertNotInTiers fails if a record of the source (id, offset pairs)
// was written to a tier.
func assertNotInTiers(t *testing.T, s *scenario, idOffsets ...any) {
	t.Helper()
	names := map[string]string{}
	for i := 0; i+1 < len(idOffsets); i += 2 {
		names[fmt.Sprintf("%s/0/%d", s.src.topic, idOffsets[i+1])] = idOffsets[i].(string)
	}
	for _, tier := range s.tiers {
		for _, m := range readCommitted(t, tier, s.partitions) {
			if id := envelopeOf(t, m).ID; names[id] != "" {
				t.Fatalf("%s was copied into %s: it should wait parked", names[id], tier)
			}
		}
	}
}
