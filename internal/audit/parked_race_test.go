package audit

import (
	"testing"

	"relay/internal/envelope"
	"relay/internal/keyorder"
)

// Regression (found by mutation testing): the audit runs beside a relay that is writing. cut reads the
// group's committed offsets first and the ends of the derived partitions
// after, so it reads what relay wrote in between: here the commit at the
// cut parks 3 (committed at 3, handled up to 5), and before the ends are
// read relay hands 3 back at its key's turn and writes its output, in a
// later transaction. judge's "parked && outs+rejs > 0" makes that a
// duplicate (a finding, exit 1), though the record has one output. An
// offset at or above the committed offset with an output written after
// the cut is "not consumed", not a finding; a parked one must not be one
// either (a real second end state still shows, as two outputs, once the
// commit moves past it).
func TestParkedRecordHandledAfterTheCutIsNoDuplicate(t *testing.T) {
	s := testScan(t, nil)
	pt := s.batch[0]
	pt.committed = 3
	pt.parked = keyorder.Parked{Offsets: []int64{3}, Hi: 5}
	for _, off := range []int64{0, 1, 2, 3, 4} { // 3's output written after the cut
		s.outputRecord(msg("orders.valid", off, nil, nil, h(envelope.MessageID, envelope.ID("orders", 0, off)), printOf(off)))
	}
	s.judge()
	pr := s.rep.Partitions[0]
	if pr.Duplicated != 0 || pr.Lost != 0 {
		t.Errorf("%+v: 3, parked at the cut and output once since, judged a duplicate", pr)
	}
	for _, f := range s.rep.Findings {
		t.Errorf("finding: %+v", f)
	}
}
