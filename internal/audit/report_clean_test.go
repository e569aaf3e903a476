package audit

import (
	"bytes"
	"strings"
	"testing"
)

// A report is clean only without a finding that fails it: one lost,
// duplicated, misrouted or stuck record each fails it, and the text
// says so; unverifiable records alone do not.
func TestReportClean(t *testing.T) {
	for _, c := range []struct {
		kind  Kind
		clean bool
	}{
		{KindLost, false}, {KindDuplicated, false}, {KindMisrouted, false}, {KindStuck, false}, {KindUnverifiable, true},
	} {
		r := &Report{Totals: map[Kind]int64{}}
		r.note(c.kind, &Coord{Topic: "src", Partition: 0, Offset: 7}, Coord{}, "why", 10)
		r.finish()
		if r.Clean != c.clean || r.FindingsTotal != 1 || len(r.Findings) != 1 {
			t.Errorf("one %s finding: clean %v, total %d, listed %d; want clean %v, 1, 1", c.kind, r.Clean, r.FindingsTotal, len(r.Findings), c.clean)
		}
		var b bytes.Buffer
		r.Text(&b)
		if got := strings.Contains(b.String(), "NOT CLEAN"); got == c.clean {
			t.Errorf("one %s finding: the text says NOT CLEAN %v:\n%s", c.kind, got, b.String())
		}
	}
	r := &Report{Totals: map[Kind]int64{}}
	r.finish()
	if !r.Clean {
		t.Error("an empty report is not clean")
	}
}
