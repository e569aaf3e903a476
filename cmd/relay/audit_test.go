package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"relay/internal/audit"
	"relay/internal/cli"
)

// A run refused for its command line writes its metrics too, as an
// incomplete run: an earlier clean result must not stand for it.
func TestAuditUsageWritesMetrics(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.prom")
	code, _, errs := runArgs(t, "127.0.0.1:1", "audit", "--source", "orders", "--from", "yesterday", "--metrics-file", file)
	if code != cli.Usage || !strings.Contains(errs, `--from "yesterday"`) {
		t.Fatalf("exit %d, stderr %q; want 2 naming --from", code, errs)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("no metrics written: %v", err)
	}
	if !strings.Contains(string(b), `relay_audit_outcome{outcome="incomplete",source="orders"} 1`) {
		t.Fatalf("metrics do not say incomplete:\n%s", b)
	}
}

// An audit's exit code is its verdict: 3 without one (an error, or no
// report), 1 with a finding that fails it, 0 clean.
func TestAuditExit(t *testing.T) {
	for _, c := range []struct {
		rep  *audit.Report
		err  error
		want int
	}{
		{&audit.Report{Clean: true}, nil, cli.OK},
		{&audit.Report{Clean: false}, nil, cli.Failure},
		{nil, errors.New("read timeout"), cli.NoVerdict},
		{&audit.Report{Clean: true}, errors.New("partial"), cli.NoVerdict},
		{nil, nil, cli.NoVerdict},
	} {
		if got := auditExit(c.rep, c.err); got != c.want {
			t.Errorf("report %+v, error %v: exit %d, want %d", c.rep, c.err, got, c.want)
		}
	}
}

// A refusal without --source writes no metrics: they would name no
// source, and hide the real source's last success.
func TestAuditWithoutSourceWritesNoMetrics(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.prom")
	if code, _, _ := runArgs(t, "127.0.0.1:1", "audit", "--metrics-file", file); code != cli.Usage {
		t.Fatalf("exit %d, want 2", code)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("metrics written for no source: %v", err)
	}
}

// Mutation run finding: a completed audit whose metrics cannot be written
// is exit 3, naming the flag: a clean run must not exit 0 while its
// alerts still read the previous result.
func TestAuditMetricsNotWrittenIsNoVerdict(t *testing.T) {
	var out, errs bytes.Buffer
	a := &app{stdout: &out, stderr: &errs}
	al := &auditLine{metrics: filepath.Join(t.TempDir(), "no-such-dir", "audit.prom")}
	res := &audit.RunResult{Source: "orders", Report: &audit.Report{Source: "orders", Clean: true, Totals: map[audit.Kind]int64{}}}
	if code := al.publish(a, res, cli.OK); code != cli.NoVerdict || !strings.Contains(errs.String(), "--metrics-file") {
		t.Fatalf("exit %d, stderr %q; want 3 naming --metrics-file", code, errs.String())
	}
}
