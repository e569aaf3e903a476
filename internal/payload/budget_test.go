package payload

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"relay/internal/envelope"
)

// Redaction reads about 4 µs a byte, and the page shows 64 KiB: a
// decoded record's strings are read up to sanitizeBudget bytes in all, in
// the order the page shows them, and no further (a 1 MiB string took 8 s
// a view; 1,000 strings of 1 KiB, 2.5 s with the budget, 8 s without);
// JSON Lines are read as far as the page shows them.
func TestSanitizeReadsStringsWithinItsBudget(t *testing.T) {
	red := envelope.NewRedactor(nil, MaxShown)
	shownBytes := func(v any) (read, past int) {
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				if x == notShown {
					past++
				} else {
					read += len(x)
				}
			case map[string]any:
				for _, e := range x {
					walk(e)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			}
		}
		walk(v)
		return read, past
	}
	// One long string: its start, cut at a space, redacted; a secret in
	// that start masked, what is past it not shown at all.
	long := "password=hunter2-first " + strings.Repeat("leave at the door ", (1<<20)/18) + " token=hunter2-last"
	out := Sanitize(red, map[string]any{"note": long}).(map[string]any)["note"].(string)
	if !strings.HasSuffix(out, "… (cut)") || len(out) > sanitizeBudget+len(" … (cut)") || strings.Contains(out, "hunter2") {
		t.Errorf("a 1 MiB string: %d bytes, cut %v, hunter2 in it %v", len(out), strings.HasSuffix(out, "… (cut)"), strings.Contains(out, "hunter2"))
	}
	// Many strings: the first (keys in order) read whole, the rest not.
	m := map[string]any{}
	for i := range 1000 {
		m[fmt.Sprintf("note%04d", i)] = strings.Repeat("leave at the door ", 57) // 1 KiB
	}
	got := Sanitize(red, m).(map[string]any)
	read, past := shownBytes(got)
	if read > sanitizeBudget || past == 0 || got["note0000"] == notShown || got["note0999"] != notShown {
		t.Errorf("1,000 strings of 1 KiB: %d bytes read (budget %d), %d not shown; note0000 %.20q, note0999 %.20q", read, sanitizeBudget, past, got["note0000"], got["note0999"])
	}
	// JSON Lines: read up to what the page shows, and no further.
	var lines []string
	for range 1000 {
		b, _ := json.Marshal(map[string]any{"n": strings.Repeat("leave at the door ", 57)})
		lines = append(lines, string(b))
	}
	text, ok := jsonLines(t.Context(), red, []byte(strings.Join(lines, "\n")))
	if !ok || len(text) > MaxShown+knownMargin+2<<10 {
		t.Errorf("1,000 JSON lines of 1 KiB: %d bytes redacted, want what the page shows (%d) and a line", len(text), MaxShown+knownMargin)
	}
	// Bytes fields too (Avro bytes): each is shown by its text.
	bs := []any{}
	for range 8 {
		bs = append(bs, []byte(strings.Repeat("leave at the door ", 4000))) // 70 KiB
	}
	if s := fmt.Sprint(Sanitize(red, bs)); strings.Count(s, "not shown: past what the page shows") < 4 {
		t.Errorf("8 bytes fields of 70 KiB: %d not shown, want those past %d bytes", strings.Count(s, "not shown: past what the page shows"), sanitizeBudget)
	}
}

// The line across the display limit is read to its end only when that
// is near: a string of 256 KiB on one line is read to the limit.
func TestShownLinesCutsALongLine(t *testing.T) {
	short := []byte(strings.Repeat("  \"a\": \"b\",\n", (MaxShown+knownMargin)/12+100))
	if got := shownLines(short); len(got) < MaxShown+knownMargin || got[len(got)-1] != ',' {
		t.Errorf("short lines: cut at %d, ending %q; want the line across the limit whole", len(got), got[len(got)-1])
	}
	long := []byte("  \"note\": \"" + strings.Repeat("leave at the door ", (256<<10)/18) + "\"\n}")
	if got := shownLines(long); len(got) > MaxShown+knownMargin {
		t.Errorf("a 256 KiB line: %d bytes read, want at most %d", len(got), MaxShown+knownMargin)
	}
}
