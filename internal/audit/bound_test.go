package audit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
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
	defer func(f func(context.Context, *config.Config, *kafka.AdminClient, *Options) (*Report, error)) {
		runBody = f
	}(runBody)
	runBody = func(context.Context, *config.Config, *kafka.AdminClient, *Options) (*Report, error) { panic("boom") }
	if _, err := Run(context.Background(), &config.Config{}, nil, &Options{}); !errors.As(err, &ce) {
		t.Fatalf("Run of a crash: %v, want a CrashError", err)
	}
}

// A window with nothing in it notes nothing, even below the log's start;
// one below the log's start notes its offsets unverifiable.
func TestWindowBelowTheLogStart(t *testing.T) {
	for _, c := range []struct {
		lo, hi int64
		want   int64
	}{{0, 0, 0}, {5, 2, 0}, {0, 5, 5}, {3, 20, 7}} {
		s := testScan(t, nil)
		pt := &part{lo: c.lo, hi: c.hi, logStart: 10, committed: 10}
		if err := pt.bound("orders"); err != nil {
			t.Fatal(err)
		}
		pt.slots, pt.fps = make([]slot, pt.hi-pt.base), make([]uint16, pt.hi-pt.base)
		s.parts[0], s.batch[0] = pt, pt
		s.judge()
		pr := s.rep.Partitions[len(s.rep.Partitions)-1]
		if got := s.rep.Totals[KindUnverifiable]; (got > 0) != (c.want > 0) || pr.Unverifiable != c.want {
			t.Errorf("[%d, %d) below 10: %d findings, %d unverifiable; want %d unverifiable", c.lo, c.hi, got, pr.Unverifiable, c.want)
		}
	}
}
