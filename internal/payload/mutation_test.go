package payload

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/zricethezav/gitleaks/v8/detect"
	"github.com/zricethezav/gitleaks/v8/report"

	"relay/internal/envelope"
)

// Each layer fails closed on its own, not only through the detector's
// gate at the end (a mutation round: dropping any of these checks was
// caught by no test, the gate hiding it).
func TestEachLayerFailsClosedWhenLate(t *testing.T) {
	red := envelope.NewRedactor(nil, MaxShown)
	// a string reached past the deadline is not read.
	if got := newWalk(after(0), red).at("an ordinary note", 0); got != notShown {
		t.Errorf("walk, late: %q", got)
	}
	// a base64 run not checked in time is masked.
	run := base64.StdEncoding.EncodeToString([]byte("an ordinary sentence of text"))
	if got, ok := newWalk(after(0), red).probeBase64("see "+run, 0); !ok || strings.Contains(got, run) {
		t.Errorf("probe, late: %q", got)
	}
	// redactLines reads no line past the deadline.
	if got := redactLines(after(0), red, []byte("{\n  \"note\": \"ordinary\"\n}")); strings.Contains(got, "ordinary") {
		t.Errorf("redactLines, late: %q", got)
	}
	// with the detector off (its gate gone), still nothing.
	was := detectKnown
	detectKnown = false
	defer func() { detectKnown = was }()
	if got := ShownCtx(after(0), red, []byte("an ordinary line of text")); strings.Contains(got, "ordinary") {
		t.Errorf("text, late, detector off: %q", got)
	}
	if got, _ := jsonLines(after(1), red, []byte("{\"ordinary\":\"x\"}\n{\"b\":2}")); strings.Contains(got, "ordinary") {
		t.Errorf("JSON Lines, late mid-line: %q", got)
	}
}

// The string across the budget is cut at a space: no part of a
// token is shown.
func TestBudgetCutShowsNoPartOfAToken(t *testing.T) {
	const token = "ghp_R8x2Kq7ZtV4mN1pW9sL3cY6bH0fJ5dG2aE8u"
	filler := strings.Repeat("leave at the door ", sanitizeBudget/18+1)
	s := filler[:sanitizeBudget-10] + " " + token + " tail"
	out := Sanitize(envelope.NewRedactor(nil, MaxShown), s).(string)
	if strings.Contains(out, token[:8]) {
		t.Errorf("a token across the budget: %q shown", out[len(out)-40:])
	}
}

// Values masked by name, 8 bytes long or inside a masked map,
// are masked where they stand again.
func TestEchoesOfEveryMaskedValue(t *testing.T) {
	red := envelope.NewRedactor(nil, MaxShown)
	for _, doc := range []string{
		`{"password":"Xy7qLm2w","note":"the code Xy7qLm2w here"}`,
		`{"auth":{"user":"svc","value":"Qw8zPl3mNx"},"log":"login with Qw8zPl3mNx failed"}`,
	} {
		if out := ShownCtx(t.Context(), red, []byte(doc)); strings.Contains(out, "Xy7qLm2w") || strings.Contains(out, "Qw8zPl3mNx") {
			t.Errorf("%s:\n%s", doc, out)
		}
	}
}

// A JSON string is charged for its text read again: two of 20 KiB
// take 120 KiB of the budget, and a string after them is cut.
func TestJSONInAStringIsChargedTwice(t *testing.T) {
	words := func(n int) string { return strings.Repeat("leave at the door ", n/18) }
	doc, _ := json.Marshal(map[string]string{"n": words(20 << 10)})
	got := Sanitize(envelope.NewRedactor(nil, MaxShown), map[string]any{"a": string(doc), "b": string(doc), "c": words(30 << 10)}).(map[string]any)["c"].(string)
	if got != notShown && !strings.HasSuffix(got, "… (cut)") {
		t.Errorf("a string after two JSON strings of 20 KiB: %d bytes shown whole", len(got))
	}
}

// Past maxDepth a JSON string, or base64 JSON, is masked whole.
func TestDeepStringsAreMaskedWhole(t *testing.T) {
	red := envelope.NewRedactor(nil, MaxShown)
	wrap := func(inner any, n int) string {
		for range n {
			b, _ := json.Marshal(map[string]any{"a": inner})
			inner = string(b)
		}
		return inner.(string)
	}
	b, _ := json.Marshal(Sanitize(red, map[string]any{"x": wrap("hello there, ordinary", 7)}))
	if strings.Contains(string(b), "ordinary") {
		t.Errorf("7 levels of JSON in strings: %s", b)
	}
	run := base64.StdEncoding.EncodeToString([]byte(`{"password":"hunter2-secret"}`))
	l0, _ := json.Marshal(map[string]any{"b": run})
	b, _ = json.Marshal(Sanitize(red, map[string]any{"x": wrap(string(l0), 3)}))
	if strings.Contains(string(b), run[:16]) {
		t.Errorf("base64 JSON at depth %d: %s", maxDepth, b)
	}
}

// Known reads only what the page shows, and a margin.
func TestKnownReadsOnlyWhatThePageShows(t *testing.T) {
	if _, err := leaks(); err != nil {
		t.Fatal(err)
	}
	read := 0
	was := detectString
	detectString = func(d *detect.Detector, s string) []report.Finding { read += len(s); return was(d, s) }
	defer func() { detectString = was }()
	known(t.Context(), strings.Repeat("leave at the door ", (1<<20)/18))
	if max := (MaxShown + knownMargin) * (detectChunk + detectOverlap) / detectChunk; read > max+detectChunk+detectOverlap {
		t.Errorf("the detector read %d bytes of 1 MiB, want about %d", read, max)
	}
}

// A span inside another leaves the outer one masked whole.
func TestMaskSpansNested(t *testing.T) {
	if got := maskSpans("0123456789", [][2]int{{0, 8}, {2, 4}}); got != envelope.Mask+"89" {
		t.Errorf("nested spans: %q", got)
	}
}

// A value more often than maxOccurrences leaves nothing, however
// often past it.
func TestEchoesFarPastTheBound(t *testing.T) {
	many := strings.Repeat("hunter22 ", 2*maxOccurrences)
	if got := maskEchoes(t.Context(), many, []string{"hunter22"}); strings.Contains(got, "hunter22") {
		t.Errorf("a value %d times: %.60q", 2*maxOccurrences, got)
	}
}
