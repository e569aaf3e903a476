package payload

import (
	"fmt"
	"strings"
	"testing"

	"relay/internal/envelope"
)

// Echoes are masked in one pass over one index of the text, as a union:
// thousands of them were a pass each (sixth pentest: 47,000, 7.7 s).
func TestMaskEchoesInOnePass(t *testing.T) {
	if got := maskEchoes(t.Context(), "abcdefghXabcdefgh tail", []string{"abcdefgh", "cdefghXa", "abcdefgh"}); got != envelope.Mask+" tail" {
		t.Errorf("overlapping echoes: %q, want one mask", got)
	}
	var vals []string
	for i := range 20000 {
		vals = append(vals, fmt.Sprintf("secret-%06d", i))
	}
	text := "a secret-000007 here, secret-019999 there, \"secret-\\u003c1\" and secret-1 (short) kept"
	got := maskEchoes(t.Context(), text, append(vals, "secret-<1"))
	if strings.Contains(got, "000007") || strings.Contains(got, "019999") || strings.Contains(got, "u003c1") || !strings.Contains(got, "secret-1 (short)") {
		t.Errorf("20,000 echoes over a text holding three: %q", got)
	}
	// A value standing more often than maxOccurrences: nothing of the
	// text is shown.
	many := strings.Repeat("hunter22 ", maxOccurrences+1)
	if got := maskEchoes(t.Context(), many, []string{"hunter22"}); strings.Contains(got, "hunter22") {
		t.Errorf("a value %d times: %.60q", maxOccurrences+1, got)
	}
}
