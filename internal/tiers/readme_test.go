package tiers

import (
	"strings"
	"testing"

	"relay/internal/readme"
)

// TestReadmeListsEveryCode: codes and classes are metric labels and part of
// relay's interface; the README lists each, from the table and constants.
func TestReadmeListsEveryCode(t *testing.T) {
	text := readme.Text(t)
	for c, r := range table {
		if r.code != "" && !strings.Contains(text, "`"+r.code+"`") {
			t.Errorf("README does not list the code %s (cause %d)", r.code, c)
		}
	}
	for _, s := range classNames {
		if !strings.Contains(text, "`"+s+"`") && !strings.Contains(text, "| "+s+" |") {
			t.Errorf("README does not list the class %s", s)
		}
	}
	if !strings.Contains(text, CodeUnclassified+ExhaustedSuffix) || !strings.Contains(text, RejectedPrefix) || !strings.Contains(text, RulePrefix) {
		t.Error("README does not explain the composed codes")
	}
}
