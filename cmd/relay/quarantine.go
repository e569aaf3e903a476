package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"relay/internal/ledger"
	"relay/internal/quarantine"
)

const quarantineUsage = `Usage:
  relay quarantine list [filters] [--json]
        unresolved failures (open, replaying, failed-again), oldest first
        --code C[,C]          error codes
        --min-age D           quarantined at least D ago (e.g. 1h, 7d)
        --max-age D           quarantined at most D ago
        --schema-version N    writer schema version of the record
        --partition P         source partition
        --source TOPIC        source topic
        --state S[,S]|all     states (default: open,replaying,failed-again)
  relay quarantine show <failure-id>
        the failure envelope as JSON, with its ledger state and history
  relay quarantine stats [--json]
        counts by state; unresolved by code with the oldest; retention headroom
  relay quarantine discard <failure-id>... --reason TEXT [--actor NAME] [--include-replaying]
        close failures without replay; recorded in the ledger
        --include-replaying   also failures being replayed: relay drops the replayed
                              record at its turn, unless it has already taken it up

A failure id is topic/partition/offset of the record's first appearance, as
in the relay.failure.id header. The actor defaults to RELAY_ACTOR, else
user@host. Exit codes: 0 ok, 1 runtime failure, 2 bad input (nothing written).
`

// runQuarantine is `relay quarantine ...`.
func runQuarantine(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, quarantineUsage)
		return exitUsage
	}
	switch args[0] {
	case "show":
		return quarantineShow(ctx, args[1:], lookup, environ, stdout, stderr)
	case "list":
		return quarantineList(ctx, args[1:], lookup, environ, stdout, stderr)
	case "stats":
		return quarantineStats(ctx, args[1:], lookup, environ, stdout, stderr)
	case "discard":
		return quarantineDiscard(ctx, args[1:], lookup, environ, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, quarantineUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "relay quarantine: unknown command %q\n\n%s", args[0], quarantineUsage)
	return exitUsage
}

// withSnapshot runs an operator command's body on a fresh snapshot of the
// ledger and the quarantine; it returns the body's exit code, or the
// setup's or the read's.
func withSnapshot(ctx context.Context, name string, lookup func(string) (string, bool), environ []string, stderr io.Writer,
	keep func(id string) bool, body func(o *ops, s *quarantine.Snapshot) int) int {
	o, code := opsSetup(lookup, environ, stderr)
	if code != exitOK {
		return code
	}
	defer o.close()
	s, err := quarantine.Load(ctx, o.cfg, o.admin, keep)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitFailure
	}
	if s.Warning != nil {
		fmt.Fprintf(stderr, "warning: %v\n", s.Warning)
	}
	return body(o, s)
}

func quarantineList(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	fs := newFlags("relay quarantine list", quarantineUsage, stderr)
	spec := quarantine.Spec{Partition: -1}
	registerFilter(fs, &spec, true)
	asJSON := fs.Bool("json", false, "JSON lines instead of a table")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "relay quarantine list: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	now := time.Now()
	f, err := spec.Build(now)
	if err != nil {
		fmt.Fprintf(stderr, "relay quarantine list: %v\n", err)
		return exitUsage
	}
	return withSnapshot(ctx, "relay quarantine list", lookup, environ, stderr, nil, func(o *ops, s *quarantine.Snapshot) int {
		if err := quarantine.CheckSource(o.cfg, f.Source); err != nil {
			fmt.Fprintf(stderr, "relay quarantine list: %v\n", err)
			return exitUsage
		}
		printList(stdout, s.Items(f, now), now, *asJSON)
		return exitOK
	})
}

// registerFilter registers the selection flags shared by list and replay.
func registerFilter(fs *flag.FlagSet, sp *quarantine.Spec, withStates bool) {
	fs.StringVar(&sp.Codes, "code", "", "error codes, comma-separated")
	fs.StringVar(&sp.MinAge, "min-age", "", "quarantined at least this long ago")
	fs.StringVar(&sp.MaxAge, "max-age", "", "quarantined at most this long ago")
	fs.StringVar(&sp.SchemaVersions, "schema-version", "", "writer schema versions, comma-separated")
	fs.IntVar(&sp.Partition, "partition", -1, "source partition")
	fs.StringVar(&sp.Source, "source", "", "source topic")
	fs.StringVar(&sp.Since, "since", "", "quarantined at or after (RFC 3339 time, or a duration ago)")
	fs.StringVar(&sp.Until, "until", "", "quarantined at or before (RFC 3339 time, or a duration ago)")
	if withStates {
		fs.StringVar(&sp.States, "state", "", "states, comma-separated, or all")
	}
}

// printList prints the list as a table, or as JSON Lines (one object a
// line).
func printList(w io.Writer, items []quarantine.Item, now time.Time, jsonLines bool) {
	if jsonLines {
		enc := json.NewEncoder(w)
		for _, it := range items {
			_ = enc.Encode(it)
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FAILURE ID\tSTATE\tCODE\tAGE\tSCHEMA\tREPLAYS\tRECORD")
	for _, it := range items {
		sv := "-"
		if it.SchemaVersion > 0 {
			sv = "v" + strconv.Itoa(it.SchemaVersion)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", it.ID, it.State, it.Code, age(now.Sub(it.Since)), sv, it.ReplayCount, it.Record)
	}
	_ = tw.Flush()
}

func quarantineShow(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprint(stderr, quarantineUsage)
		return exitUsage
	}
	id := args[0]
	if _, _, _, err := quarantine.ParseFailureID(id); err != nil {
		fmt.Fprintf(stderr, "relay quarantine show: %v\n", err)
		return exitUsage
	}
	keep := func(x string) bool { return x == id }
	return withSnapshot(ctx, "relay quarantine show", lookup, environ, stderr, keep, func(_ *ops, s *quarantine.Snapshot) int {
		out, ok := s.Show(id)
		if !ok {
			fmt.Fprintf(stderr, "relay quarantine show: %s is not in the ledger nor in a quarantine topic\n", id)
			return exitUsage
		}
		if out.RecordGone {
			fmt.Fprintf(stderr, "relay quarantine show: the quarantine record of %s is gone (retention); the ledger remains\n", id)
		}
		if writeJSON(stdout, out) != nil {
			return exitFailure
		}
		return exitOK
	})
}

// writeJSON writes v as one pretty-printed JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func quarantineStats(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	fs := newFlags("relay quarantine stats", quarantineUsage, stderr)
	asJSON := fs.Bool("json", false, "JSON instead of text")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "relay quarantine stats: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	return withSnapshot(ctx, "relay quarantine stats", lookup, environ, stderr, nil, func(_ *ops, s *quarantine.Snapshot) int {
		printStats(stdout, s.Stats(time.Now()), *asJSON)
		return exitOK
	})
}

func printStats(w io.Writer, st quarantine.Stats, asJSON bool) {
	if asJSON {
		_ = writeJSON(w, st)
		return
	}
	now := time.Now()
	fmt.Fprintf(w, "failures by state:")
	for _, s := range ledger.States {
		fmt.Fprintf(w, " %s=%d", s, st.ByState[s])
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CODE\tUNRESOLVED\tOLDEST")
	for _, c := range st.ByCode {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", c.Code, c.Unresolved, age(time.Duration(c.OldestAgeSeconds)*time.Second))
	}
	_ = tw.Flush()
	for t, d := range st.Deadline {
		fmt.Fprintf(w, "retention headroom of %s: %s (the oldest unresolved record may be deleted from %s)\n",
			t, age(d.Sub(now)), d.UTC().Format(time.RFC3339))
	}
}

func quarantineDiscard(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	fs := newFlags("relay quarantine discard", quarantineUsage, stderr)
	d := &quarantine.Discard{}
	actor := fs.String("actor", "", "who (default RELAY_ACTOR, else user@host)")
	fs.StringVar(&d.Reason, "reason", "", "why (required; recorded in the ledger)")
	fs.BoolVar(&d.IncludeReplaying, "include-replaying", false, "also failures being replayed")
	ids, err := parseInterspersed(fs, args)
	if err != nil {
		return exitUsage
	}
	d.IDs = ids
	return discard(ctx, d, *actor, lookup, environ, stdout, stderr)
}

// discard checks and applies a discard, and says what it did.
func discard(ctx context.Context, d *quarantine.Discard, actor string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	if err := d.Check(); err != nil {
		fmt.Fprintf(stderr, "relay quarantine discard: %v\nnothing was discarded\n", err)
		return exitUsage
	}
	d.Actor, d.Reason = quarantine.Actor(actor, lookup), strings.TrimSpace(d.Reason)
	return withSnapshot(ctx, "relay quarantine discard", lookup, environ, stderr, nil, func(o *ops, s *quarantine.Snapshot) int {
		inFlight, err := d.Apply(ctx, o.cfg, s)
		if err != nil {
			fmt.Fprintf(stderr, "relay quarantine discard: %v\nnothing was discarded\n", err)
			if errors.As(err, new(*quarantine.InputError)) {
				return exitUsage
			}
			return exitFailure
		}
		for _, id := range d.IDs {
			fmt.Fprintf(stdout, "discarded %s (by %s: %s)\n", id, d.Actor, d.Reason)
			if rp, ok := inFlight[id]; ok {
				fmt.Fprintf(stdout, "  its replay %s was in flight: relay drops the replayed record at its turn, unless it had already taken it up"+
					" (then its outcome stands: relay quarantine show %s)\n", rp, id)
			}
		}
		return exitOK
	})
}

// age renders a duration for tables: whole seconds, minutes, hours, days.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + age(-d)
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}
