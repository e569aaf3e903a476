package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"relay/internal/quarantine"
	"relay/internal/replay"
)

const replayUsage = `Usage:
  relay replay --reason TEXT <selection> [options]

Replays quarantined records through relay: each selected record is
published to the replay topic with its original identity and
relay.replay.count incremented, in a transaction with its ledger change
(replaying); relay consumes the replay topic through the same pipeline and
records each outcome (resolved, failed-again) in the ledger.

Selection (at least one; only open failures unless --include-failed-again;
resolved, discarded, replaying ones and those whose record is gone are
skipped and counted):
  --ids ID[,ID]            failure ids (these may also be failed-again)
  --code C[,C]             error codes
  --schema-version N[,N]   writer schema versions
  --since T / --until T    quarantined in a window (RFC 3339, or a duration ago: 24h, 7d)
  --min-age D / --max-age D
  --source TOPIC / --partition P
  --all                    every open failure
  --include-failed-again   also failures whose earlier replay failed again
  --include-replaying      also failures still replaying from an earlier replay (its record lost,
                           e.g. past the replay topic's retention); relay outputs a failure once
                           whichever copy comes first, and notes the other as a duplicate

Options:
  --reason TEXT            why (required; recorded in the ledger)
  --actor NAME             who (default RELAY_ACTOR, else user@host)
  --dry-run                run today's admission and rules on the selection; write nothing;
                           report what would pass and what would still fail, by code
  --sample N               replay a deterministic sample of about N records first (whole keys,
                           so a key's order holds) and wait for their outcomes before the rest
  --rate R                 records per second at most (default 50)
  --max-failure-rate F     stop when this share of known outcomes failed again (default 0.5)
  --min-outcomes N         outcomes needed before the threshold applies after the sample (default 10)
  --wait D                 how long to wait for outcomes (default 5m)
  --progress MODE          auto, bar, lines or none (default auto: a bar on a terminal)
  --json                   the report (dry run or summary) as JSON on stdout

Exit codes: 0 done (outcomes in the summary), 1 runtime failure,
2 bad input (nothing written), 3 stopped by the repeat-failure threshold,
4 outcomes not all known within --wait.
`

// Exit codes of relay replay besides exitOK, exitFailure and exitUsage.
const (
	exitStopped    = 3 // the repeat-failure threshold stopped the replay
	exitIncomplete = 4 // published, but not every outcome is known yet
)

// replayCmd is `relay replay`'s command line.
type replayCmd struct {
	o        replay.Options
	actor    string
	progress string
	asJSON   bool
}

func (rc *replayCmd) register(fs *flag.FlagSet) {
	o := &rc.o
	fs.StringVar(&o.Reason, "reason", "", "")
	fs.StringVar(&rc.actor, "actor", "", "")
	fs.StringVar(&o.IDs, "ids", "", "")
	registerFilter(fs, &o.Filter, false)
	fs.BoolVar(&o.All, "all", false, "")
	fs.BoolVar(&o.IncludeFailedAgain, "include-failed-again", false, "")
	fs.BoolVar(&o.IncludeReplaying, "include-replaying", false, "")
	fs.BoolVar(&o.DryRun, "dry-run", false, "")
	fs.IntVar(&o.Sample, "sample", 0, "")
	fs.Float64Var(&o.Rate, "rate", o.Rate, "")
	fs.Float64Var(&o.MaxFailureRate, "max-failure-rate", o.MaxFailureRate, "")
	fs.IntVar(&o.MinOutcomes, "min-outcomes", o.MinOutcomes, "")
	fs.DurationVar(&o.Wait, "wait", o.Wait, "")
	fs.StringVar(&rc.progress, "progress", "auto", "")
	fs.BoolVar(&rc.asJSON, "json", false, "")
}

// check names every problem of the command line.
func (rc *replayCmd) check(pos []string, now time.Time) error {
	var errs []error
	if len(pos) > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q (failure ids go in --ids)", pos[0]))
	}
	errs = append(errs, rc.o.Check(now))
	switch rc.progress {
	case "auto", "bar", "lines", "none":
	default:
		errs = append(errs, fmt.Errorf("--progress %q: not auto, bar, lines or none", rc.progress))
	}
	return errors.Join(errs...)
}

// runReplay is `relay replay`.
func runReplay(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	now := time.Now()
	rc := &replayCmd{o: replay.Defaults()}
	fs := newFlags("relay replay", replayUsage, stderr)
	rc.register(fs)
	pos, err := parseInterspersed(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		return exitUsage
	}
	return rc.run(ctx, pos, now, lookup, environ, stdout, stderr)
}

func (rc *replayCmd) run(ctx context.Context, pos []string, now time.Time, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	if err := rc.check(pos, now); err != nil {
		fmt.Fprintf(stderr, "relay replay: %v\nnothing was replayed\n", err)
		return exitUsage
	}
	rc.o.Actor = quarantine.Actor(rc.actor, lookup)
	ops, code := opsSetup(lookup, environ, stderr)
	if code != exitOK {
		return code
	}
	defer ops.close()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	plan, err := replay.Prepare(ctx, ops.cfg, ops.admin, &rc.o, now)
	if err != nil {
		fmt.Fprintf(stderr, "relay replay: %v\nnothing was replayed\n", err)
		return codeOf(err)
	}
	defer plan.Close()
	if s := plan.Snapshot; s.Warning != nil {
		fmt.Fprintf(stderr, "warning: %v\n", s.Warning)
	}
	if sel := plan.Selection; len(sel.Records) == 0 {
		fmt.Fprintf(stdout, "nothing to replay: 0 failures selected%s\n", replay.Skips(sel.Skipped))
		return exitOK
	}
	if rc.o.DryRun {
		return rc.dryRun(ctx, plan, stdout, stderr)
	}
	id := replay.NewID(now)
	res, err := plan.Run(ctx, &rc.o, id, stderr, newProgress(rc.progress, stderr, id, len(plan.Selection.Records), rc.o.Rate))
	if err != nil {
		fmt.Fprintf(stderr, "relay replay: %v\nnothing was replayed\n", err)
		return exitFailure
	}
	if res.Err != nil {
		fmt.Fprintf(stderr, "relay replay: %v\n", res.Err)
	}
	printSummary(stdout, res, rc.asJSON)
	return [...]int{replay.Done: exitOK, replay.Stopped: exitStopped, replay.Incomplete: exitIncomplete,
		replay.Interrupted: exitFailure, replay.Failed: exitFailure}[res.Status]
}

// codeOf is the exit code of an operator command's error: bad input is 2.
func codeOf(err error) int {
	var in *quarantine.InputError
	var re *replay.RulesError
	if errors.As(err, &in) || errors.As(err, &re) {
		return exitUsage
	}
	return exitFailure
}

func (rc *replayCmd) dryRun(ctx context.Context, plan *replay.Plan, stdout, stderr io.Writer) int {
	p, err := plan.Predict(ctx, &rc.o)
	if err != nil {
		fmt.Fprintf(stderr, "relay replay: %v\n", err)
		return codeOf(err)
	}
	if rc.asJSON {
		_ = writeJSON(stdout, p)
		return exitOK
	}
	printPrediction(stdout, p)
	return exitOK
}
