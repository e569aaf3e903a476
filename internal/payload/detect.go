package payload

import (
	"sort"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"github.com/zricethezav/gitleaks/v8/detect"
	gllog "github.com/zricethezav/gitleaks/v8/logging"
	"github.com/zricethezav/gitleaks/v8/report"

	"relay/internal/envelope"
)

// Known secret formats in free text (cloud keys, service tokens, private
// keys...) are found by gitleaks' detector and its maintained rule set,
// beside relay's own patterns and structural rules, which know secrets by
// the names beside them. Its decoding pass finds them base64-, hex- and
// percent-encoded too.

var (
	// detectKnown turns the detector on; off only for a benchmark's
	// baseline.
	detectKnown = true

	detectorOnce sync.Once
	detector     *detect.Detector
	detectorErr  error
	// detectorMu: a Detector keeps counters and is not documented as
	// safe for concurrent use.
	detectorMu sync.Mutex
)

// leaks is gitleaks' detector with its default rules, made once.
func leaks() (*detect.Detector, error) {
	detectorOnce.Do(func() {
		// Its log would carry what it finds: nothing of it is wanted.
		gllog.Logger = zerolog.Nop()
		detector, detectorErr = detect.NewDetectorDefaultConfig()
		if detector != nil {
			detector.MaxDecodeDepth = 2
		}
	})
	return detector, detectorErr
}

// maskKnown masks every secret of a known format in s: its bytes where
// the detector found them, and the same secret wherever else it is.
func maskKnown(s string) string {
	if !detectKnown {
		return s
	}
	d, err := leaks()
	if err != nil || s == "" {
		return s
	}
	detectorMu.Lock()
	found := d.DetectString(s)
	detectorMu.Unlock()
	if len(found) == 0 {
		return s
	}
	spans := spansOf(s, found)
	var b strings.Builder
	at := 0
	for _, sp := range spans {
		if sp[0] < at {
			sp[0] = at
		}
		if sp[1] <= sp[0] {
			continue
		}
		b.WriteString(s[at:sp[0]])
		b.WriteString(envelope.Mask)
		at = sp[1]
	}
	b.WriteString(s[at:])
	out := b.String()
	for _, f := range found {
		if len(f.Secret) >= 8 {
			out = strings.ReplaceAll(out, f.Secret, envelope.Mask)
		}
	}
	return out
}

// spansOf are the byte ranges of s the findings cover, in order: from
// their lines and columns (the detector counts a line from its newline,
// columns from 1), the secret's own bytes when they are there literally.
func spansOf(s string, found []report.Finding) [][2]int {
	var nl []int
	for i := range len(s) {
		if s[i] == '\n' {
			nl = append(nl, i)
		}
	}
	lineStart := func(line int) int {
		if line <= 0 || len(nl) == 0 {
			return 0
		}
		return nl[min(line, len(nl))-1]
	}
	var spans [][2]int
	for _, f := range found {
		start := lineStart(f.StartLine) + f.StartColumn - 1
		end := lineStart(f.EndLine) + f.EndColumn
		if start < 0 || end > len(s) || start >= end {
			continue
		}
		// Within the match, the secret itself when it is there as is
		// (a rule's match often holds the name before it, kept).
		if i := strings.Index(s[start:end], f.Secret); f.Secret != "" && i >= 0 {
			start, end = start+i, start+i+len(f.Secret)
		}
		spans = append(spans, [2]int{start, end})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	return spans
}
