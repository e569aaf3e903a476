package payload

import (
	"strings"
	"testing"

	"github.com/zricethezav/gitleaks/v8/detect"
	"github.com/zricethezav/gitleaks/v8/report"
)

// The detector reads chunks of at most detectChunk+detectOverlap bytes:
// it matches an allowlist against each finding's whole line, and a line
// of 64 KiB with a finding every 20 bytes took 9 s (sixth pentest). A
// secret across a chunk's end is whole in the next chunk's overlap; one
// found in a chunk is masked wherever else it stands.
func TestDetectorReadsShortChunks(t *testing.T) {
	if _, err := leaks(); err != nil {
		t.Fatal(err)
	}
	longest := 0
	was := detectString
	detectString = func(d *detect.Detector, s string) []report.Finding {
		longest = max(longest, len(s))
		return was(d, s)
	}
	defer func() { detectString = was }()
	const token = "ghp_R8x2Kq7ZtV4mN1pW9sL3cY6bH0fJ5dG2aE8u"
	for _, at := range []int{0, detectChunk - 20, detectChunk - 1, 3*detectChunk - len(token)/2, 60 << 10} {
		text := strings.Repeat("x", at) + " " + token + " " + strings.Repeat("leave at the door ", (64<<10)/18)
		if out := maskKnown(t.Context(), text[:64<<10]); strings.Contains(out, "ghp_") {
			t.Errorf("a token at byte %d: shown (%d bytes out)", at, len(out))
		}
	}
	// Found by its context in one place (a generic key), masked where it
	// stands alone too.
	if out := maskKnown(t.Context(), `api = "Xk29fLq83vBz0PwAyT7w" and later Xk29fLq83vBz0PwAyT7w alone`); strings.Contains(out, "Xk29fLq83vBz0PwAyT7w") {
		t.Errorf("the same secret elsewhere: %q", out)
	}
	if longest > detectChunk+detectOverlap {
		t.Errorf("the detector read %d bytes at once, want at most %d", longest, detectChunk+detectOverlap)
	}
}
