package audit

import (
	"testing"

	"relay/internal/envelope"
	"relay/internal/keyorder"
)

// The commit's parked set, as the audit reads it: committed at 3 with 3
// and 5 parked up to 8. 0 to 2 are consumed; 4, 6 and 7, settled above
// the committed offset, are judged as consumed (6, with no end state, is
// lost); 3 and 5 are parked, in flight; 8 and 9 are not consumed yet.
func TestJudgeTheCommittedParkedSet(t *testing.T) {
	s := testScan(t, nil)
	pt := s.batch[0]
	pt.committed = 3
	pt.parked = keyorder.Parked{Offsets: []int64{3, 5}, Hi: 8}
	for _, off := range []int64{0, 1, 2, 4, 7} {
		s.outputRecord(msg("orders.valid", off, nil, nil, h(envelope.MessageID, envelope.ID("orders", 0, off)), printOf(off)))
	}
	s.judge()
	pr := s.rep.Partitions[0]
	if pr.Processed != 5 || pr.Parked != 2 || pr.Lost != 1 || pr.Behind != 2 || pr.Duplicated != 0 {
		t.Fatalf("%+v: want 5 processed (0-2, 4, 7), 2 parked (3, 5), 1 lost (6), 2 not consumed (8, 9)", pr)
	}
	if sum := s.rep.sum(); sum.Parked != 2 {
		t.Errorf("summary parked %d, want 2", sum.Parked)
	}
}
