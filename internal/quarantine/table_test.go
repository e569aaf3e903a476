package quarantine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"
	"text/tabwriter"
	"time"

	"relay/internal/cli"
	"relay/internal/envelope"
)

// The streamed list prints what the list of items printed: the table,
// the JSON array and JSON Lines, byte for byte, whatever is selected.
func TestStreamedListsAsWritten(t *testing.T) {
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 11))
		events, records := randomQuarantine(r)
		x := NewIndex()
		x.mu.Lock()
		for i, e := range events {
			x.apply(e, loc{0, int64(i)})
		}
		x.mu.Unlock()
		for _, m := range records {
			x.addRecord(m, *m.TopicPartition.Topic, "orders")
		}
		for _, f := range []*Filter{{Partition: -1}, {Partition: 1}, {Partition: -1, Codes: []string{"HOOK_TIMEOUT"}}} {
			items := x.Items(f, now)
			var want, got bytes.Buffer
			writeTable(&want, items, now)
			if err := x.StreamTable(&got, f, now); err != nil || got.String() != want.String() {
				t.Fatalf("seed %d table:\n%s\nwant\n%s", seed, got.String(), want.String())
			}
			want.Reset()
			got.Reset()
			_ = cli.WriteJSON(&want, items)
			if err := x.StreamJSON(&got, f, now, false); err != nil || got.String() != want.String() {
				t.Fatalf("seed %d json:\n%s\nwant\n%s", seed, got.String(), want.String())
			}
			want.Reset()
			got.Reset()
			writeJSONLines(&want, items)
			if err := x.StreamJSON(&got, f, now, true); err != nil || got.String() != want.String() {
				t.Fatalf("seed %d json lines:\n%s\nwant\n%s", seed, got.String(), want.String())
			}
			want.Reset()
			got.Reset()
			_ = cli.WriteYAML(&want, items)
			if err := x.StreamYAML(&got, f, now, cli.WriteYAML); err != nil || got.String() != want.String() {
				t.Fatalf("seed %d yaml:\n%s\nwant\n%s", seed, got.String(), want.String())
			}
		}
	}
}

// Columns are as wide as their widest cell in characters, as the table
// writer counts them, not in bytes.
func TestStreamedTableCountsCharacters(t *testing.T) {
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	x := NewIndex()
	for i, code := range []string{"ÉÉÉÉ", "ABCDEF"} {
		x.addRecord(record(fmt.Sprintf("o/0/%d", i), 0, int64(i), now, func(f *envelope.Failure) { f.Code = code }), "o.quarantine", "o")
	}
	f := &Filter{Partition: -1}
	var want, got bytes.Buffer
	writeTable(&want, x.Items(f, now), now)
	if err := x.StreamTable(&got, f, now); err != nil || got.String() != want.String() {
		t.Fatalf("table:\n%s\nwant\n%s", got.String(), want.String())
	}
}

// writeJSONLines is JSON Lines of items, as the command wrote them before
// it streamed: the reference.
func writeJSONLines(w io.Writer, items []Item) {
	enc := json.NewEncoder(w)
	for _, it := range items {
		_ = enc.Encode(it)
	}
}

// writeTable is items as a table aligned by text/tabwriter, as the
// command wrote it before it streamed: the reference.
func writeTable(w io.Writer, items []Item, now time.Time) {
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
