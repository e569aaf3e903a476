package reference

import (
	"strings"
	"testing"

	"relay/internal/ledger"
)

// The commands section appears with the commands passed, and only then.
func TestCommandsSection(t *testing.T) {
	if strings.Contains(string(Render(nil)), "## Commands") {
		t.Error("a commands section without commands")
	}
	got := string(Render([]Command{{Path: "relay run", Short: "the daemon"}}))
	if !strings.Contains(got, "## Commands") || !strings.Contains(got, "| `relay run` | the daemon |") {
		t.Errorf("commands section missing:\n%s", got)
	}
}

// Every class has a decision.
func TestEveryClassHasADecision(t *testing.T) {
	for _, r := range codeRows() {
		if decisions[r.class] == "" {
			t.Errorf("class %s of %s has no decision", r.class, r.code)
		}
	}
}

// Every ledger state has a row.
func TestEveryLedgerStateHasARow(t *testing.T) {
	have := map[string]bool{}
	for _, s := range states() {
		have[s.state] = true
	}
	for _, s := range ledger.States {
		if !have[str(s)] {
			t.Errorf("ledger state %s has no row", s)
		}
	}
}
