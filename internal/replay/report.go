package replay

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the report as text.
func (p *Prediction) WriteText(w io.Writer) {
	fmt.Fprintf(w, "dry run: nothing was written\n")
	fmt.Fprintf(w, "selected: %d records, %d bytes%s\n", p.Selected, p.Bytes, Skips(p.Skipped))
	what := "admission and rules"
	if !p.SchemaChecked {
		what = "(no schema registry configured: nothing to check)"
	}
	fmt.Fprintf(w, "would pass %s: %d (the hook is not called in a dry run)\n", what, p.WouldPass)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(p.WouldFail)+len(p.WouldReject)+len(p.WouldRetry) > 0 {
		fmt.Fprintln(tw, "WOULD\tCODE\tRECORDS")
		for _, g := range []struct {
			what string
			m    map[string]int
		}{{"fail again", p.WouldFail}, {"be rejected", p.WouldReject}, {"retry (transient now)", p.WouldRetry}} {
			codes := make([]string, 0, len(g.m))
			for c := range g.m {
				codes = append(codes, c)
			}
			sort.Strings(codes)
			for _, c := range codes {
				fmt.Fprintf(tw, "%s\t%s\t%d\n", g.what, c, g.m[c])
			}
		}
		_ = tw.Flush()
	}
	eta := time.Duration(p.EstimatedSecs * float64(time.Second)).Round(time.Second)
	fmt.Fprintf(w, "at --rate %g/s: about %s to publish", p.Rate, eta)
	if p.Sample > 0 {
		fmt.Fprintf(w, ", after a sample of %d and its outcomes", p.Sample)
	}
	fmt.Fprintln(w)
}

// WriteText writes the summary as text.
func (r *Result) WriteText(w io.Writer) {
	c := r.Counts
	fmt.Fprintf(w, "replay %s by %s: %q\n", r.ReplayID, r.Actor, r.Reason)
	fmt.Fprintf(w, "selected %d; published %d; resolved %d; rejected %d; failed-again %d; duplicate %d; outcome unknown %d%s\n",
		c.Total, c.Published, c.Resolved, c.Rejected, c.FailedAgain, c.Duplicate, c.Pending, Skips(r.Skipped))
	if len(r.Late) > 0 {
		fmt.Fprintf(w, "left alone, changed by someone else during the replay:%s\n", strings.TrimPrefix(Skips(r.Late), "; skipped:"))
	}
	if r.Note != "" {
		fmt.Fprintln(w, r.Note)
	}
}

// TextProgress shows a replay's progress: a bar redrawn in place on a
// terminal, plain lines otherwise (at most one a second, and the last).
type TextProgress struct {
	w     io.Writer
	mode  string
	id    string
	total int
	rate  float64
	last  time.Time
	start time.Time
}

// NewTextProgress shows the progress of replay id on w: mode is bar,
// lines, none, or auto (a bar on a terminal, else lines).
func NewTextProgress(mode string, w io.Writer, id string, total int, rate float64) *TextProgress {
	if mode == "auto" {
		mode = "lines"
		if IsTerminal(w) {
			mode = "bar"
		}
	}
	return &TextProgress{w: w, mode: mode, id: id, total: total, rate: rate, start: time.Now()}
}

// IsTerminal says whether w is a terminal: a progress bar is drawn only
// there (relay audit's too), none when piped.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Update draws c, at most every second (a bar: 200ms).
func (p *TextProgress) Update(c Counts) {
	every := time.Second
	if p.mode == "bar" {
		every = 200 * time.Millisecond
	}
	if p.mode == "none" || time.Since(p.last) < every {
		return
	}
	p.last = time.Now()
	p.draw(c)
}

// Done draws c, the last counts.
func (p *TextProgress) Done(c Counts) {
	if p.mode == "none" {
		return
	}
	p.draw(c)
	if p.mode == "bar" {
		fmt.Fprintln(p.w)
	}
}

func (p *TextProgress) draw(c Counts) {
	eta := time.Duration(float64(c.Total-c.Published) / p.rate * float64(time.Second)).Round(time.Second)
	elapsed := time.Since(p.start).Seconds()
	speed := 0.0
	if elapsed > 0 {
		speed = float64(c.Published) / elapsed
	}
	pct := 100 * c.Published / max(c.Total, 1)
	if p.mode == "bar" {
		const width = 30
		fill := width * c.Published / max(c.Total, 1)
		fmt.Fprintf(p.w, "\r[%s%s] %d/%d %3d%%  resolved %d  failed-again %d  waiting %d  %.1f/s  ETA %s ",
			strings.Repeat("#", fill), strings.Repeat(".", width-fill), c.Published, c.Total, pct,
			c.Resolved+c.Rejected, c.FailedAgain, c.Pending, speed, eta)
		return
	}
	fmt.Fprintf(p.w, "progress replay=%s published=%d/%d percent=%d resolved=%d rejected=%d failed_again=%d duplicate=%d waiting=%d rate=%.1f/s eta=%s\n",
		p.id, c.Published, c.Total, pct, c.Resolved, c.Rejected, c.FailedAgain, c.Duplicate, c.Pending, speed, eta)
}
