package payload

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/envelope"
)

// countdown is a context whose time is up after its n-th question: a
// render's deadline falling at each step in turn, deterministically.
type countdown struct {
	context.Context
	left atomic.Int64
}

func after(n int64) *countdown {
	c := &countdown{Context: context.Background()}
	c.left.Store(n)
	return c
}

func (c *countdown) Err() error {
	if c.left.Add(-1) < 0 {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *countdown) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }

// steps are the checks after which a test's render runs out of time.
var steps = []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 45, 70}

// A render whose time runs out leaves out what it has not checked: with
// the deadline at every step of every payload of the secret corpus, no
// secret is shown (seventh pentest: 64 KiB of the detector's rule
// keywords took 7 s a view; a deadline bounds it, and must fail closed).
func TestARenderOutOfTimeShowsNoSecret(t *testing.T) {
	red := envelope.NewRedactor(nil, MaxShown)
	for name, c := range corpus(t, "secret") {
		// Text also long enough for the detector to read several chunks,
		// with its secrets at the end too (JSON and JSON Lines stay so).
		payloads := []string{c.payload}
		_, isJSON := jsonTree([]byte(c.payload))
		if _, isLines := jsonLines(t.Context(), red, []byte(c.payload)); !isJSON && !isLines {
			payloads = append(payloads, c.payload+"\n"+strings.Repeat("leave at the door ", 150)+"\n"+c.payload)
		}
		for _, payload := range payloads {
			for _, n := range steps {
				out := ShownCtx(after(n), red, []byte(payload))
				for _, s := range c.secrets {
					if strings.Contains(out, s) || (len(s) >= 16 && strings.Contains(out, s[:12])) {
						t.Fatalf("%s, out of time after %d checks: %q shown:\n%s", name, n, s, out)
					}
				}
			}
		}
	}
	// Out of time at once: nothing of the payload, and a note.
	if out := ShownCtx(after(0), red, []byte("an ordinary line of text")); strings.Contains(out, "ordinary") || !strings.Contains(out, "too long") {
		t.Errorf("out of time at once: %q", out)
	}
	if out := ShownCtx(after(0), red, []byte(`{"note":"an ordinary note"}`)); strings.Contains(out, "ordinary") {
		t.Errorf("JSON, out of time at once: %q", out)
	}
}

// A secret the detector finds only where its label is (Password for …:)
// is masked where it stands unlabelled too; a render out of time before
// the detector has read that far shows nothing, not the unlabelled one
// (eighth pentest: it showed the chunks it had read).
func TestOutOfTimeTheDetectorShowsNothing(t *testing.T) {
	red := envelope.NewRedactor(nil, MaxShown)
	const secret = "Zq8vN3kLm2Xp9Yt7Ws4R"
	text := "ticket 4711: customer pasted the staging DB password, it is " + secret + " please rotate\n" +
		strings.Repeat("notes about the ticket, nothing secret here. ", 60) + "\nPassword for the staging db: " + secret + "\n"
	if out := Shown(red, []byte(text)); strings.Contains(out, secret) {
		t.Fatalf("in time, the secret is shown:\n%s", out)
	}
	for n := int64(0); n < 40; n++ {
		if out := ShownCtx(after(n), red, []byte(text)); strings.Contains(out, secret) {
			t.Fatalf("out of time after %d checks, the secret is shown:\n%s", n, out)
		}
	}
}

// JSON Lines are read as far as the page shows them, a line too: one
// line of a megabyte was redacted whole, and every empty string in it
// became a note 41 bytes long (eighth pentest: 52 s a view).
func TestJSONLinesReadAsFarAsThePageShows(t *testing.T) {
	red := envelope.NewRedactor(nil, MaxShown)
	long := "[" + strings.TrimSuffix(strings.Repeat(`"",`, (1<<20)/3), ",") + "]\n[]"
	text, ok := jsonLines(t.Context(), red, []byte(long))
	if !ok || len(text) > MaxShown+knownMargin+1 {
		t.Errorf("a 1 MiB line: %d bytes read (ok %v), want at most %d", len(text), ok, MaxShown+knownMargin)
	}
	if strings.Contains(text, notShown) || !strings.HasPrefix(text, `["","",`) {
		t.Errorf("empty strings became notes: %.80q", text)
	}
}
