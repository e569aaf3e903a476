package integration

import (
	"strings"
	"testing"
)

// TestAuditCannotReadALedgerChange: a ledger change in the state topic
// that relay audit cannot read (a newer relay's format) makes the audit
// give no verdict (exit 3) naming the record, instead of skipping a
// change that could settle or reopen a failure; and a window wholly
// below the source's log start is audited (its offsets unverifiable),
// not a crash.
func TestAuditCannotReadALedgerChange(t *testing.T) {
	s := newScenario(t, 1)
	s.src.produce(t, 20)
	r := startRelay(t, "relay", s.env(uniq(t, "txn")))
	assertExactlyOnce(t, s.src, s.output, s.group, 1)
	r.stop()
	assertAuditClean(t, s)

	deleteRecords(t, s.src.topic, 0, 10)
	rep, res := auditOf(t, s, "--from-offsets", "0:0", "--to-offsets", "0:5")
	if res.code != 0 || rep.Partitions[0].Unverifiable != 5 || rep.Partitions[0].Lost != 0 {
		t.Fatalf("a window below the log start: exit %d, %+v, stderr %s; want 5 unverifiable", res.code, rep.Partitions[0], res.stderr)
	}

	// One of a record of the window (offset 13, not deleted).
	off := produceRaw(t, s.stateTopic(), 0, []byte("q|"+s.src.topic+"/0/13|0|state"),
		[]byte(`{"v":2,"id":"`+s.src.topic+`/0/13","state":"replaying"}`), nil)
	res = s.cli(t, nil, "audit", "--source", s.src.topic)
	if res.code != 3 || !strings.Contains(res.stderr, "cannot be read") || !strings.Contains(res.stderr, s.stateTopic()) {
		t.Fatalf("an unreadable ledger change at %d: exit %d, stderr %s; want 3 naming it", off, res.code, res.stderr)
	}
}
