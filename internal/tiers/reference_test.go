package tiers

import (
	"strings"
	"testing"
)

// Every cause has a code (or a pattern) and a meaning in the reference.
func TestTableDocumentsEveryCause(t *testing.T) {
	rows := Table()
	if len(rows) != len(table) {
		t.Fatalf("Table has %d rows for %d causes", len(rows), len(table))
	}
	for _, r := range rows {
		if r.Code == "" || r.Meaning == "" {
			t.Errorf("cause %d: code %q, meaning %q", r.Cause, r.Code, r.Meaning)
		}
		if table[r.Cause].code == "" && !strings.Contains(r.Code, "<") {
			t.Errorf("cause %d builds its code from a name, but the reference shows %q", r.Cause, r.Code)
		}
	}
	if got := len(Classes()); got != len(classNames) {
		t.Errorf("Classes lists %d of %d", got, len(classNames))
	}
}
