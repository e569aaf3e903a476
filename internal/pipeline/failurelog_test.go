package pipeline

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A burst of failures of one code logs the first few of each window and
// then one line with how many were not logged; other codes have their own
// budget.
func TestFailureLogIsBoundedPerCodeAndWindow(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var f failureLog
	now := time.Unix(1000, 0)
	logged := 0
	for range 1000 {
		if f.allow(log, "SCHEMA_REGISTRY_UNAVAILABLE", now) {
			logged++
		}
	}
	if !f.allow(log, "HOOK_UNAVAILABLE", now) {
		t.Error("another code shares the first one's budget")
	}
	if logged != failureLogBurst {
		t.Fatalf("%d of 1000 failures logged in one window, want %d", logged, failureLogBurst)
	}
	if buf.Len() != 0 {
		t.Fatalf("summary before the window ended: %s", buf.String())
	}
	if !f.allow(log, "SCHEMA_REGISTRY_UNAVAILABLE", now.Add(failureLogWindow)) {
		t.Error("a new window has no budget")
	}
	if !strings.Contains(buf.String(), "suppressed=995") || !strings.Contains(buf.String(), "code=SCHEMA_REGISTRY_UNAVAILABLE") {
		t.Errorf("summary: %s", buf.String())
	}
}
