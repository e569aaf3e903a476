// Package readme lets tests check that the README lists the names that
// are part of relay's interface (variables, headers, codes, states,
// metrics), taken from the constants in the code, so the two cannot drift.
package readme

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Text is the repository's README.
func Text(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Lists fails t for every name the README does not show as code (`name`);
// what says what the names are, for the message.
func Lists(t testing.TB, what string, names ...string) {
	t.Helper()
	text := Text(t)
	for _, n := range names {
		if !strings.Contains(text, "`"+n+"`") {
			t.Errorf("README does not list the %s %s", what, n)
		}
	}
}
