package quarantine

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"relay/internal/ledger"
)

// WriteJSONLines writes items as JSON Lines: one JSON object a line.
func WriteJSONLines(w io.Writer, items []Item) {
	enc := json.NewEncoder(w)
	for _, it := range items {
		_ = enc.Encode(it)
	}
}

// WriteTable writes items as a table, their ages at now.
func WriteTable(w io.Writer, items []Item, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FAILURE ID\tSTATE\tCODE\tAGE\tSCHEMA\tREPLAYS\tRECORD")
	for _, it := range items {
		sv := "-"
		if it.SchemaVersion > 0 {
			sv = "v" + strconv.Itoa(it.SchemaVersion)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", it.ID, it.State, it.Code, Age(now.Sub(it.Since)), sv, it.ReplayCount, it.Record)
	}
	_ = tw.Flush()
}

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
