package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"relay/internal/cli"
	"relay/internal/payload"
	"relay/internal/quarantine"
)

const quarantineLong = `The quarantine as an operational queue: what failed, since when, how
close to retention; close failures with a reason.

A failure id is topic/partition/offset of the record's first appearance, as
in the relay.failure.id header. The actor defaults to RELAY_ACTOR, else
user@host. Exit codes: 0 ok, 1 runtime failure, 2 bad input (nothing written).`

func (a *app) quarantineCmd() *cobra.Command {
	c := cli.Group(&cobra.Command{Use: "quarantine", Short: "list, show, count and discard quarantined failures", Long: quarantineLong}, a.stderr)
	c.AddCommand(a.listCmd(), a.showCmd(), a.statsCmd(), a.discardCmd())
	return c
}

func (a *app) listCmd() *cobra.Command {
	spec := quarantine.Spec{Partition: -1}
	var out cli.Output
	var jsonLines bool
	c := &cobra.Command{
		Use:   "list [filters]",
		Short: "unresolved failures (open, replaying, failed-again), oldest first",
		Long: `Lists failures, oldest first (by default the unresolved ones): id, state,
error code, age, writer schema version, replays, and where the quarantine
record is ("gone (retention)" if it was deleted). With -o json, one JSON
array of the failures. The deprecated --json prints JSON Lines instead, as
it always did.`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			now := time.Now()
			f, err := spec.Build(now)
			if err != nil {
				fmt.Fprintf(a.stderr, "relay quarantine list: %v\n", err)
				return cli.ExitCode(cli.Usage)
			}
			return cli.Status(a.withIndex(c.Context(), "relay quarantine list", "", func(o *ops, r *quarantine.Reader) int {
				if err := quarantine.CheckSource(o.cfg, f.Source); err != nil {
					fmt.Fprintf(a.stderr, "relay quarantine list: %v\n", err)
					return cli.Usage
				}
				// Streamed: memory does not grow with the rows.
				x, err := r.Index(), error(nil)
				switch {
				case jsonLines || out == cli.JSON:
					err = x.StreamJSON(a.stdout, f, now, jsonLines)
				case out == cli.YAML:
					err = x.StreamYAML(a.stdout, f, now, cli.WriteYAML)
				default:
					err = x.StreamTable(a.stdout, f, now)
				}
				if err != nil {
					return cli.Failure
				}
				return cli.OK
			}))
		},
	}
	spec.Bind(c.Flags(), true)
	cli.OutputFlag(c, &out, false)
	c.Flags().BoolVar(&jsonLines, "json", false, "one JSON object a line")
	_ = c.Flags().MarkDeprecated("json", "use -o json (one JSON array)")
	return c
}

func (a *app) showCmd() *cobra.Command {
	var format cli.Document
	c := &cobra.Command{
		Use:   "show <failure-id>",
		Short: "the failure envelope as JSON (or YAML), with its ledger state and history",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			id := args[0]
			if _, _, _, err := quarantine.ParseFailureID(id); err != nil {
				fmt.Fprintf(a.stderr, "relay quarantine show: %v\n", err)
				return cli.ExitCode(cli.Usage)
			}
			return cli.Status(a.withIndex(c.Context(), "relay quarantine show", id, func(o *ops, r *quarantine.Reader) int {
				out, ok, err := r.Show(c.Context(), id, payload.ForConfig(o.cfg))
				if err != nil {
					fmt.Fprintf(a.stderr, "warning: %v\n", err)
				}
				return a.show(id, out, ok, format.Output)
			}))
		},
	}
	cli.DocumentFlag(c, &format)
	return c
}

func (a *app) show(id string, out quarantine.Shown, ok bool, format cli.Output) int {
	if !ok {
		fmt.Fprintf(a.stderr, "relay quarantine show: %s is not in the ledger nor in a quarantine topic\n", id)
		return cli.Usage
	}
	if out.RecordGone {
		fmt.Fprintf(a.stderr, "relay quarantine show: the quarantine record of %s is gone (retention); the ledger remains\n", id)
	}
	if cli.Write(a.stdout, format, out) != nil {
		return cli.Failure
	}
	return cli.OK
}

func (a *app) statsCmd() *cobra.Command {
	var out cli.Output
	c := &cobra.Command{
		Use:   "stats",
		Short: "counts by state; unresolved by code with the oldest; retention headroom",
		Long:  "Counts by state; unresolved by code, with the oldest; retention headroom per quarantine topic. -o json: one JSON object.",
		Args:  cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return cli.Status(a.withIndex(c.Context(), "relay quarantine stats", "", func(_ *ops, r *quarantine.Reader) int {
				now := time.Now()
				st := r.Index().Stats(now)
				a.print(out, st, func(w io.Writer) { st.WriteText(w, now) })
				return cli.OK
			}))
		},
	}
	cli.OutputFlag(c, &out, true)
	return c
}

func (a *app) discardCmd() *cobra.Command {
	d := &quarantine.Discard{}
	var actor string
	c := &cobra.Command{
		Use:   "discard <failure-id>... --reason TEXT",
		Short: "close failures without replay; recorded in the ledger",
		Long: `Closes failures without replay, in one transaction, or none if any cannot
be (resolved, already discarded, or being replayed without --include-replaying).`,
		RunE: func(c *cobra.Command, ids []string) error {
			d.IDs = ids
			return cli.Status(a.discard(c.Context(), d, actor))
		},
	}
	c.Flags().StringVar(&d.Reason, "reason", "", "why (required; recorded in the ledger)")
	c.Flags().StringVar(&actor, "actor", "", "who (default RELAY_ACTOR, else user@host)")
	c.Flags().BoolVar(&d.IncludeReplaying, "include-replaying", false, "also failures being replayed")
	return c
}

// discard checks and applies a discard, and says what it did.
func (a *app) discard(ctx context.Context, d *quarantine.Discard, actor string) int {
	if err := d.Check(); err != nil {
		fmt.Fprintf(a.stderr, "relay quarantine discard: %v\nnothing was discarded\n", err)
		return cli.Usage
	}
	d.Actor, d.Reason = quarantine.Actor(actor, a.lookup), strings.TrimSpace(d.Reason)
	return a.withIndex(ctx, "relay quarantine discard", "", func(o *ops, r *quarantine.Reader) int {
		if code := a.fitTransactionTimeout(ctx, o, "relay quarantine discard", "nothing was discarded"); code != cli.OK {
			return code
		}
		inFlight, err := d.Apply(ctx, o.cfg, r.Index())
		if err != nil {
			fmt.Fprintf(a.stderr, "relay quarantine discard: %v\nnothing was discarded\n", err)
			return codeOf(err)
		}
		d.WriteText(a.stdout, inFlight)
		return cli.OK
	})
}
