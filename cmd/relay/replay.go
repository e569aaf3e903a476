package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"relay/internal/cli"
	"relay/internal/quarantine"
	"relay/internal/replay"
)

// replayLine is `relay replay`'s command line.
type replayLine struct {
	o        replay.Options
	actor    string
	progress string
	out      cli.Output
}

func (a *app) replayCmd() *cobra.Command {
	rl := &replayLine{o: replay.Defaults()}
	c := &cobra.Command{
		Use:   "replay --reason TEXT <selection> [options]",
		Short: "replay quarantined records through relay, rate-limited and recorded in the ledger",
		Long:  replay.Help,
		RunE: func(c *cobra.Command, args []string) error {
			return cli.Status(a.replay(c.Context(), rl, args, time.Now()))
		},
	}
	rl.flags(c)
	return c
}

func (rl *replayLine) flags(c *cobra.Command) {
	o, fs := &rl.o, c.Flags()
	fs.StringVar(&o.Reason, "reason", "", "why (required; recorded in the ledger)")
	fs.StringVar(&rl.actor, "actor", "", "who (default RELAY_ACTOR, else user@host)")
	fs.StringVar(&o.IDs, "ids", "", "failure ids, comma-separated (these may also be failed-again)")
	o.Filter.Bind(fs, false)
	fs.BoolVar(&o.All, "all", false, "every open failure")
	fs.BoolVar(&o.IncludeFailedAgain, "include-failed-again", false, "also failures whose earlier replay failed again")
	fs.BoolVar(&o.IncludeReplaying, "include-replaying", false, "also failures still replaying from an earlier replay whose record was lost; "+
		"relay outputs a failure once whichever copy comes first")
	fs.BoolVar(&o.DryRun, "dry-run", false, "run today's admission and rules on the selection; write nothing")
	fs.IntVar(&o.Sample, "sample", 0, "replay a deterministic sample of about N records first (whole keys) and wait for their outcomes")
	fs.BoolVar(&o.SampleOnly, "sample-only", false, "replay the sample alone; replay the rest later with the same selection (the sample's resolved failures are skipped then)")
	fs.Float64Var(&o.Rate, "rate", o.Rate, "records per second at most")
	fs.Float64Var(&o.MaxFailureRate, "max-failure-rate", o.MaxFailureRate, "stop when this share of known outcomes failed again")
	fs.IntVar(&o.MinOutcomes, "min-outcomes", o.MinOutcomes, "outcomes needed before the threshold applies after the sample")
	fs.DurationVar(&o.Wait, "wait", o.Wait, "how long to wait for outcomes")
	fs.Int64Var(&o.MaxReplayLag, "max-replay-lag", o.MaxReplayLag, "stop when relay's lag on the replay topic is above this many offsets and grew over the last 3 checks, 2 s apart (0: not watched)")
	fs.IntVar(&o.MaxDuplicates, "max-duplicates", o.MaxDuplicates, "stop when more replayed records than this turn out to be copies of settled failures (not with --include-replaying, where copies are expected)")
	fs.IntVar(&o.MaxHookTimeouts, "max-hook-timeouts", o.MaxHookTimeouts, "stop when the hook times out more often than this during the replay (needs --watch-metrics)")
	fs.StringSliceVar(&o.WatchMetrics, "watch-metrics", nil, "relay instances' /metrics URLs, comma-separated, whose relay_hook_timeouts_total is watched (default RELAY_REPLAY_WATCH_METRICS)")
	fs.StringVar(&rl.progress, "progress", "auto", "auto, bar, lines or none (auto: a bar on a terminal)")
	cli.OutputFlag(c, &rl.out, true)
}

// check names every problem of the command line.
func (rl *replayLine) check(pos []string, now time.Time) error {
	var errs []error
	if len(pos) > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q (failure ids go in --ids)", pos[0]))
	}
	errs = append(errs, rl.o.Check(now))
	switch rl.progress {
	case "auto", "bar", "lines", "none":
	default:
		errs = append(errs, fmt.Errorf("--progress %q: not auto, bar, lines or none", rl.progress))
	}
	return errors.Join(errs...)
}

// replay is `relay replay`.
func (a *app) replay(ctx context.Context, rl *replayLine, pos []string, now time.Time) int {
	if err := rl.check(pos, now); err != nil {
		fmt.Fprintf(a.stderr, "relay replay: %v\nnothing was replayed\n", err)
		return cli.Usage
	}
	rl.o.Actor = quarantine.Actor(rl.actor, a.lookup)
	ops, code := a.setup()
	if code != cli.OK {
		return code
	}
	defer ops.admin.Close()
	if rl.o.WatchMetrics == nil {
		rl.o.WatchMetrics = ops.cfg.WatchMetrics
	}
	if !rl.o.DryRun {
		if code := a.fitTransactionTimeout(ctx, ops, "relay replay", "nothing was replayed"); code != cli.OK {
			return code
		}
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	plan, err := replay.Prepare(ctx, ops.cfg, ops.admin, &rl.o, now)
	if err != nil {
		fmt.Fprintf(a.stderr, "relay replay: %v\nnothing was replayed\n", err)
		return codeOf(err)
	}
	defer plan.Close()
	if s := plan.Snapshot; s.Warning != nil {
		fmt.Fprintf(a.stderr, "warning: %v\n", s.Warning)
	}
	if sel := plan.Selection; len(sel.Records) == 0 {
		a.print(rl.out, map[string]any{"selected": 0, "skipped": sel.Skipped}, func(w io.Writer) {
			fmt.Fprintf(w, "nothing to replay: 0 failures selected%s\n", replay.Skips(sel.Skipped))
		})
		return cli.OK
	}
	if rl.o.DryRun {
		return a.dryRun(ctx, plan, rl)
	}
	id := replay.NewID(now)
	res, err := plan.Run(ctx, &rl.o, id, a.stderr, replay.NewTextProgress(rl.progress, a.stderr, id, len(plan.Selection.Records), rl.o.Rate))
	if err != nil {
		fmt.Fprintf(a.stderr, "relay replay: %v\nnothing was replayed\n", err)
		return cli.Failure
	}
	if res.Err != nil {
		fmt.Fprintf(a.stderr, "relay replay: %v\n", res.Err)
	}
	a.print(rl.out, res, res.WriteText)
	return [...]int{replay.Done: cli.OK, replay.Stopped: cli.Stopped, replay.Incomplete: cli.Incomplete,
		replay.Interrupted: cli.Failure, replay.Failed: cli.Failure}[res.Status]
}

func (a *app) dryRun(ctx context.Context, plan *replay.Plan, rl *replayLine) int {
	p, err := plan.Predict(ctx, &rl.o)
	if err != nil {
		fmt.Fprintf(a.stderr, "relay replay: %v\n", err)
		return codeOf(err)
	}
	a.print(rl.out, p, p.WriteText)
	return cli.OK
}
