package cli

import (
	"bytes"
	"strings"
	"testing"
)

// Regression: a panic (restored key state naming a tier that was removed)
// ended relay with Go's exit status 2, the code relay documents for a bad
// configuration, which sends an operator looking for a typo. A crash is a
// runtime failure: exit 1, with a log line that says it is a bug.
func TestCrashIsNotAConfigurationError(t *testing.T) {
	var stderr bytes.Buffer
	code := Guarded(&stderr, func() int {
		var tiers []string
		return len(tiers[1:2]) // index out of range
	})
	if code != Failure {
		t.Fatalf("exit %d, want %d (runtime failure)", code, Failure)
	}
	out := stderr.String()
	if !strings.Contains(out, "internal error") || !strings.Contains(out, "out of range") || !strings.Contains(out, "goroutine") {
		t.Fatalf("stderr does not say what crashed and where:\n%s", out)
	}
}
