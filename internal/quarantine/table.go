package quarantine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"relay/internal/ledger"
)

// WriteText writes the stats as text, the headroom at now.
func (st Stats) WriteText(w io.Writer, now time.Time) {
	fmt.Fprintf(w, "failures by state:")
	for _, s := range ledger.States {
		fmt.Fprintf(w, " %s=%d", s, st.ByState[s])
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CODE\tUNRESOLVED\tOLDEST")
	for _, c := range st.ByCode {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", c.Code, c.Unresolved, Age(time.Duration(c.OldestAgeSeconds)*time.Second))
	}
	_ = tw.Flush()
	for t, d := range st.Deadline {
		fmt.Fprintf(w, "retention headroom of %s: %s (the oldest unresolved record may be deleted from %s)\n",
			t, Age(d.Sub(now)), d.UTC().Format(time.RFC3339))
	}
}

// Age renders a duration for tables: whole seconds, minutes, hours, days.
func Age(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + Age(-d)
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// Streamed lists: what `relay quarantine list` prints of an index,
// written as the index is walked, so the command's memory does not grow
// with the rows: a table aligned as text/tabwriter aligns it, JSON Lines,
// or what cli.WriteJSON writes of the items.

// tableRow is an item's cells as WriteTable writes them.
func tableRow(it *Item, now time.Time) [7]string {
	sv := "-"
	if it.SchemaVersion > 0 {
		sv = "v" + strconv.Itoa(it.SchemaVersion)
	}
	return [7]string{it.ID, string(it.State), it.Code, Age(now.Sub(it.Since)), sv, strconv.Itoa(it.ReplayCount), it.Record}
}

var tableHeader = [7]string{"FAILURE ID", "STATE", "CODE", "AGE", "SCHEMA", "REPLAYS", "RECORD"}

// StreamTable is WriteTable of the failures f selects: one pass finds
// the columns' widths, a second writes the rows.
func (x *Index) StreamTable(w io.Writer, f *Filter, now time.Time) error {
	var width [7]int
	grow := func(cells [7]string) {
		for i, c := range cells[:6] {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	grow(tableHeader)
	x.Each(func(fl *Failure) bool {
		if f.Match(fl, now) {
			it := ItemOf(fl, now)
			grow(tableRow(&it, now))
		}
		return true
	})
	bw := bufio.NewWriter(w)
	// A bufio.Writer keeps its first error and returns it from Flush.
	line := func(cells [7]string) {
		for i, c := range cells[:6] {
			_, _ = bw.WriteString(c)
			_, _ = bw.WriteString(strings.Repeat(" ", width[i]+2-utf8.RuneCountInString(c)))
		}
		_, _ = bw.WriteString(cells[6])
		_ = bw.WriteByte('\n')
	}
	line(tableHeader)
	x.Each(func(fl *Failure) bool {
		if f.Match(fl, now) {
			it := ItemOf(fl, now)
			line(tableRow(&it, now))
		}
		return true
	})
	return bw.Flush()
}

// StreamJSON writes the failures f selects as cli.WriteJSON writes a
// list of them (one indented JSON array), or as JSON Lines.
func (x *Index) StreamJSON(w io.Writer, f *Filter, now time.Time, lines bool) error {
	bw := bufio.NewWriter(w)
	n := 0
	var err error
	x.Each(func(fl *Failure) bool {
		if !f.Match(fl, now) {
			return true
		}
		it := ItemOf(fl, now)
		var b []byte
		if lines {
			b, err = json.Marshal(it)
			b = append(b, '\n')
		} else {
			sep := ",\n  "
			if n == 0 {
				sep = "[\n  "
			}
			b, err = json.MarshalIndent(it, "  ", "  ")
			b = append([]byte(sep), b...)
		}
		if err == nil {
			_, err = bw.Write(b)
		}
		n++
		return err == nil
	})
	if err != nil {
		return err
	}
	switch {
	case lines:
	case n == 0:
		_, _ = bw.WriteString("[]\n")
	default:
		_, _ = bw.WriteString("\n]\n")
	}
	return bw.Flush()
}

// StreamYAML writes the failures f selects as one YAML sequence, item by
// item, each as doc writes it (cli.WriteYAML: the document StreamJSON
// writes of it).
func (x *Index) StreamYAML(w io.Writer, f *Filter, now time.Time, doc func(io.Writer, any) error) error {
	bw := bufio.NewWriter(w)
	n := 0
	var err error
	x.Each(func(fl *Failure) bool {
		if !f.Match(fl, now) {
			return true
		}
		it := ItemOf(fl, now)
		var one bytes.Buffer
		if err = doc(&one, it); err != nil {
			return false
		}
		for i, line := range strings.Split(strings.TrimSuffix(one.String(), "\n"), "\n") {
			prefix := "  "
			if i == 0 {
				prefix = "- "
			}
			_, _ = bw.WriteString(prefix + line + "\n")
		}
		n++
		return true
	})
	if err != nil {
		return err
	}
	if n == 0 {
		_, _ = bw.WriteString("[]\n")
	}
	return bw.Flush()
}
