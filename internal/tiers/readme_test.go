package tiers

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeListsEveryCode: codes and classes are metric labels and part of
// relay's interface; the README lists each, from the table and constants.
func TestReadmeListsEveryCode(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for c, r := range table {
		if r.code != "" && !strings.Contains(readme, "`"+r.code+"`") {
			t.Errorf("README does not list the code %s (cause %d)", r.code, c)
		}
	}
	for _, s := range classNames {
		if !strings.Contains(readme, "`"+s+"`") && !strings.Contains(readme, "| "+s+" |") {
			t.Errorf("README does not list the class %s", s)
		}
	}
	if !strings.Contains(readme, CodeUnclassified+ExhaustedSuffix) || !strings.Contains(readme, RejectedPrefix) || !strings.Contains(readme, RulePrefix) {
		t.Error("README does not explain the composed codes")
	}
}
