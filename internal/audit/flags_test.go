package audit

import (
	"strings"
	"testing"
)

func TestAuditMaxMemoryIsASize(t *testing.T) {
	for in, want := range map[string]int64{"96MiB": 96 << 20, "1GiB": 1 << 30, "4096": 4096, "512KiB": 512 << 10} {
		if got, err := SizeOf("--max-memory", in); err != nil || got != want {
			t.Errorf("SizeOf(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1MiB", "96MB", "lots", "1.5GiB"} {
		if _, err := SizeOf("--max-memory", in); err == nil || !strings.Contains(err.Error(), "--max-memory") {
			t.Errorf("SizeOf(%q): %v; want an error naming the flag", in, err)
		}
	}
}
