package payload

import (
	"context"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

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

// The detector reads s in chunks of detectChunk bytes, each with the
// next detectOverlap bytes (a secret and the name before it, across a
// chunk's end, are whole in one chunk): for each finding it matches an
// allowlist against the finding's whole line, and a line of 64 KiB with
// a finding every 20 bytes took 9 s (sixth pentest).
const (
	detectChunk   = 1 << 10
	detectOverlap = 512
)

// detectString is the detector's call (a test's to watch).
var detectString = func(d *detect.Detector, s string) []report.Finding { return d.DetectString(s) }

// maskKnown masks every secret of a known format in s: its bytes where
// the detector found them, and the same secret wherever else it is.
//
// Past ctx's end nothing of s is shown, only a note: a secret found in a
// chunk not read yet would be masked in the chunks read too.
func maskKnown(ctx context.Context, s string) string {
	if !detectKnown || s == "" {
		return s
	}
	d, err := leaks()
	if err != nil {
		return s
	}
	var spans [][2]int
	var secrets []string
	for start := 0; start < len(s); {
		if ctx.Err() != nil {
			// Nothing is shown: a secret in a chunk not read could stand
			// in what was read too, without what tells it for one there
			// (eighth pentest).
			return strings.TrimPrefix(tooCostly, "\n")
		}
		end := min(start+detectChunk+detectOverlap, len(s))
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end--
		}
		chunk := s[start:end]
		detectorMu.Lock()
		found := detectString(d, chunk)
		detectorMu.Unlock()
		for _, sp := range spansOf(chunk, found) {
			spans = append(spans, [2]int{start + sp[0], start + sp[1]})
		}
		for _, f := range found {
			secrets = append(secrets, f.Secret)
		}
		if end == len(s) {
			break
		}
		next := start + detectChunk
		for next > start && !utf8.RuneStart(s[next]) {
			next--
		}
		if next == start {
			next = end
		}
		start = next
	}
	if len(spans) == 0 {
		return s
	}
	// The safety step, after the deadline too: a second of its own.
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), maskGrace)
	defer cancel()
	elsewhere, ok := occurrences(grace, s, secrets, 8)
	if !ok {
		return envelope.Mask + " (a secret of a known format stands here too often to show the rest)"
	}
	return maskSpans(s, append(spans, elsewhere...))
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
