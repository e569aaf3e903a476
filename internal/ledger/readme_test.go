package ledger

import (
	"os"
	"strings"
	"testing"
)

// The README lists every ledger state.
func TestReadmeListsEveryState(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range States {
		if !strings.Contains(string(b), "`"+s+"`") {
			t.Errorf("README does not list the state %s", s)
		}
	}
}
