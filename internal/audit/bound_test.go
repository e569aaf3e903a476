package audit

import (
	"errors"
	"strings"
	"testing"
)

// A window's read offsets start at the log's start and never pass its
// end: one that ends below the log's start (--to-offsets under it, or a
// time window over deleted records) reads nothing instead of allocating a
// negative number of slots.
func TestWindowBounds(t *testing.T) {
	for _, c := range []struct {
		name                 string
		lo, hi, logStart     int64
		wantLo, wantHi, base int64
	}{
		{"inside the log", 10, 20, 5, 10, 20, 10},
		{"from below the log's start", 0, 20, 5, 0, 20, 5},
		{"wholly below the log's start", 0, 5, 50, 0, 5, 5},
		{"an end before its start", 30, 20, 5, 30, 30, 30},
	} {
		pt := &part{lo: c.lo, hi: c.hi, logStart: c.logStart}
		if err := pt.bound("src"); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if pt.lo != c.wantLo || pt.hi != c.wantHi || pt.base != c.base || pt.hi-pt.base < 0 {
			t.Errorf("%s: [%d, %d) base %d, want [%d, %d) base %d", c.name, pt.lo, pt.hi, pt.base, c.wantLo, c.wantHi, c.base)
		}
	}
	if err := (&part{lo: 0, hi: maxWindow + 1}).bound("src"); err == nil {
		t.Error("a window over the bound is taken")
	}
}

// A crash inside the audit is an error, no verdict, not a dead process:
// the command exits 3 and writes its metrics.
func TestCrashIsAnError(t *testing.T) {
	rep, err := guard(func() (*Report, error) {
		var s []slot
		_ = s[len(s)-1+1] //nolint:gosec // the crash under test
		return &Report{Clean: true}, nil
	})
	var ce *CrashError
	if rep != nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), "index out of range") || len(ce.Stack) == 0 {
		t.Fatalf("guard of a crash: %v %v", rep, err)
	}
	if r := (&RunResult{Source: "src", Err: err}); r.Outcome() != OutcomeIncomplete {
		t.Fatalf("outcome %s, want incomplete", r.Outcome())
	}
	if rep, err := guard(func() (*Report, error) { return &Report{Clean: true}, nil }); err != nil || !rep.Clean {
		t.Fatalf("guard of a run: %v %v", rep, err)
	}
}
