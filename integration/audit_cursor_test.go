package integration

import (
	"fmt"
	"strings"
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
//
// The audit runs as a principal with exactly the ACLs `relay topics acls
// audit` prints (the cursor needs Read on the group RELAY_GROUP_ID.audit
// only: never on relay's own group, whose offsets it must not move), and
// its metrics say how far it has judged: the source time of A1 while A1
// holds the cursor, the time of the run once nothing is left.
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

	user, password := scramUser(t)
	acls := requiredACLs(t, merge(s.env(""), scramEnv(t, user, password)), "audit")
	for _, a := range acls {
		if a.Resource == "Group" && a.Operation == "Read" && a.Name != s.group+".audit" {
			t.Errorf("relay topics acls audit grants Read on group %s (prefixed %v): the audit could move relay's offsets", a.Name, a.Prefixed)
		}
	}
	grant(t, "User:"+user, acls...)
	as := flatten(scramEnv(t, user, password))
	metrics := t.TempDir() + "/relay_audit.prom"

	rep, res := auditAs(t, s, as, "--cursor", "--metrics-file", metrics)
	pr := rep.Partitions[0]
	if res.code != 0 || pr.InTier != 1 || pr.Processed != 2 || pr.Cursor != offs["A1"] || rep.Unjudged != 2 {
		t.Fatalf("first run: exit %d, %+v, %d unjudged, stderr %s; want A1 in a tier, the cursor at it (%d), 2 unjudged", res.code, pr, rep.Unjudged, res.stderr, offs["A1"])
	}
	var a1 time.Time
	for _, m := range readCommitted(t, s.src.topic, 1) {
		if int64(m.TopicPartition.Offset) == offs["A1"] {
			a1 = m.Timestamp
		}
	}
	if rep.OldestUnjudged == nil || rep.OldestUnjudged.Unix() != a1.Unix() {
		t.Fatalf("first run: the oldest unjudged %v; want A1's source time %s", rep.OldestUnjudged, a1)
	}
	want := fmt.Sprintf(`relay_audit_oldest_unjudged_timestamp_seconds{source="%s"} %g`, s.src.topic, float64(a1.Unix()))
	if text := readFile(t, metrics); !strings.Contains(text, want) {
		t.Fatalf("first run's metrics lack %s:\n%s", want, text)
	}

	commitPast(t, s.group, s.tiers[0], 0, 1)
	rep, res = auditAs(t, s, as, "--cursor")
	pr = rep.Partitions[0]
	if res.code != 1 || pr.From != offs["A1"] || pr.Lost != 1 || !findingAt(rep, audit.KindLost, fmt.Sprintf("%s/0/%d", s.src.topic, offs["A1"]), "") || pr.Cursor != pr.To {
		t.Fatalf("second run: exit %d, %+v, findings %v; want the window from A1, A1 lost, the cursor at the end", res.code, pr, rep.Findings)
	}
	before := time.Now().Add(-time.Second)
	rep, res = auditAs(t, s, as, "--cursor")
	if pr := rep.Partitions[0]; res.code != 0 || pr.From != pr.To || rep.Unjudged != 0 || rep.OldestUnjudged == nil || rep.OldestUnjudged.Before(before) {
		t.Fatalf("third run: exit %d, %+v, oldest unjudged %v; want nothing left to judge, judged up to the run", res.code, pr, rep.OldestUnjudged)
	}
	if committed, err := committedOffsets(s.group, s.src.topic, 1); err != nil || committed[0] != offs["B2"]+1 {
		t.Fatalf("relay's own group's offsets %v, %v; want partition 0 at %d, where relay left it", committed, err, offs["B2"]+1)
	}
}
