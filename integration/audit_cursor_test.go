package integration

import (
	"fmt"
	"testing"
	"time"

	"relay/internal/audit"
)

// TestAuditCursor: the audit keeps a cursor, so no record falls between
// two runs. A1's hook call keeps failing, so it waits in a 5 min tier:
// the first `relay audit --cursor` judges everything else, says A1 is in
// a tier (exit 0), and its cursor stops at A1. With relay stopped, the
// tier partition is committed past A1's copy, by hand: relay will never
// read it. The next run starts at the cursor — A1 is in its window, not
// before it as a day-long window's next day would be — and finds A1
// lost (exit 1); its cursor moves past it.
func TestAuditCursor(t *testing.T) {
	o := registerOrders(t)
	h := newOrderHook(t)
	h.setFailing("A1", true)
	s := keyScenario(t, o, h, 1, "RELAY_ORDERING", "unordered", "RELAY_RETRY_TIERS", "5m")
	offs := map[string]int64{}
	for _, id := range []string{"B1", "A1", "B2"} {
		offs[id] = produceOrder(t, o, s.src.topic, 0, id[:1], id)
	}
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	waitCaughtUp(t, s.group, s.src.topic, 1, 60*time.Second)
	waitInTier(t, s.tiers[0], fmt.Sprintf("%s/0/%d", s.src.topic, offs["A1"]))
	r.stop()

	rep, res := auditOf(t, s, "--cursor")
	pr := rep.Partitions[0]
	if res.code != 0 || pr.InTier != 1 || pr.Processed != 2 || pr.Cursor != offs["A1"] {
		t.Fatalf("first run: exit %d, %+v, stderr %s; want A1 in a tier and the cursor at it (%d)", res.code, pr, res.stderr, offs["A1"])
	}
	commitPast(t, s.group, s.tiers[0], 0, 1)
	rep, res = auditOf(t, s, "--cursor")
	pr = rep.Partitions[0]
	if res.code != 1 || pr.From != offs["A1"] || pr.Lost != 1 || !findingAt(rep, audit.KindLost, fmt.Sprintf("%s/0/%d", s.src.topic, offs["A1"]), "") || pr.Cursor != pr.To {
		t.Fatalf("second run: exit %d, %+v, findings %v; want the window from A1, A1 lost, the cursor at the end", res.code, pr, rep.Findings)
	}
	rep, res = auditOf(t, s, "--cursor")
	if pr := rep.Partitions[0]; res.code != 0 || pr.From != pr.To {
		t.Fatalf("third run: exit %d, %+v; want nothing left to judge", res.code, pr)
	}
}
