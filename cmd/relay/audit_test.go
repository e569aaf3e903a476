package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
