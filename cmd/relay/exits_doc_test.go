package main

import (
	"io"
	"regexp"
	"strings"
	"testing"

	"relay/internal/audit"
	"relay/internal/cli"
	"relay/internal/reference"
)

// Every text that says what relay audit's exit codes mean names each kind
// of finding that fails it, and its exit for no verdict (they said "lost,
// duplicated or misrouted" after stuck records failed it too, and the
// root help left exit 3 out).
func TestAuditExitCodesNamedEverywhere(t *testing.T) {
	root := newRoot(&app{lookup: func(string) (string, bool) { return "", false }, stdout: io.Discard, stderr: io.Discard})
	auditCmd, _, err := root.Find([]string{"audit"})
	if err != nil {
		t.Fatal(err)
	}
	var one string
	for _, e := range reference.ExitCodes {
		if e.Code == 1 {
			one = e.Meaning
		}
	}
	texts := map[string]string{"relay --help": root.Long, "relay audit's summary": auditCmd.Short, "relay audit --help": audit.Help, "docs/REFERENCE.md's exit 1": one}
	for what, text := range texts {
		flat := strings.Join(strings.Fields(text), " ")
		for _, k := range audit.Failing {
			if !strings.Contains(flat, string(k)) {
				t.Errorf("%s does not name %q among the findings that fail the audit", what, k)
			}
		}
		if what != "docs/REFERENCE.md's exit 1" && (!regexp.MustCompile(`\b3\b`).MatchString(flat) || !strings.Contains(flat, "no verdict")) {
			t.Errorf("%s does not give exit %d (no verdict)", what, cli.NoVerdict)
		}
	}
}
