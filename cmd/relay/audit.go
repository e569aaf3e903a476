package main

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"relay/internal/audit"
	"relay/internal/cli"
	"relay/internal/replay"
)

type auditLine struct {
	o                audit.Options
	l                audit.Line
	metrics, pushURL string
	out              cli.Output
}

func (a *app) auditCmd() *cobra.Command {
	al := &auditLine{o: audit.Options{Partition: -1}}
	c := &cobra.Command{
		Use:   "audit --source TOPIC [window] [options]",
		Short: "account for every source offset of a window: exit 1 on a record lost, duplicated, misrouted or stuck, 3 on no verdict",
		Long:  audit.Help,
		RunE: func(c *cobra.Command, args []string) error {
			return cli.Status(a.audit(c.Context(), al, args, time.Now()))
		},
	}
	al.l.Bind(c.Flags(), &al.o, &al.metrics, &al.pushURL)
	cli.OutputFlag(c, &al.out, false)
	return c
}

// audit is `relay audit`.
func (a *app) audit(ctx context.Context, al *auditLine, pos []string, now time.Time) int {
	if err := al.l.Resolve(&al.o, pos, now); err != nil {
		fmt.Fprintf(a.stderr, "relay audit: %v\n", err)
		return al.publish(a, &audit.RunResult{Source: al.o.Source, At: now, Err: err}, cli.Usage)
	}
	ops, code := a.setup()
	switch code {
	case cli.OK:
	case cli.Failure: // the brokers, not the command line
		res := &audit.RunResult{Source: al.o.Source, At: now, Err: errors.New("no admin client")}
		return al.publish(a, res, cli.NoVerdict)
	default: // the configuration
		return al.publish(a, &audit.RunResult{Source: al.o.Source, At: now, Err: errors.New("configuration refused")}, code)
	}
	defer ops.admin.Close()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	al.o.Now = now
	bar := al.l.Progress == "bar" || (al.l.Progress == "auto" && replay.IsTerminal(a.stderr))
	if bar {
		al.o.Progress = audit.Bar(a.stderr)
	}
	rep, err := audit.Run(ctx, ops.cfg, ops.admin, &al.o)
	if bar {
		fmt.Fprintln(a.stderr)
	}
	var in *audit.InputError
	if errors.As(err, &in) {
		fmt.Fprintf(a.stderr, "relay audit: %v\n", err)
		return al.publish(a, &audit.RunResult{Source: al.o.Source, At: now, Err: err}, cli.Usage)
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "relay audit: could not complete, no verdict: %v\n", err)
	}
	return al.publish(a, &audit.RunResult{Source: al.o.Source, At: now, Report: rep, Err: err}, auditExit(rep, err))
}

// auditExit is a completed audit's exit code: no verdict, findings, or
// clean.
func auditExit(rep *audit.Report, err error) int {
	switch {
	case err != nil || rep == nil:
		return cli.NoVerdict
	case !rep.Clean:
		return cli.Failure
	}
	return cli.OK
}

// publish writes the run's metrics where asked (a refused run's too, but
// for no source), prints its report, and returns its exit code (code, or
// cli.NoVerdict when the metrics could not be written).
func (al *auditLine) publish(a *app, res *audit.RunResult, code int) int {
	if res.Source == "" {
		return code
	}
	if err := res.Publish(al.metrics, al.pushURL); err != nil {
		fmt.Fprintf(a.stderr, "relay audit: %v\n", err)
		code = max(code, cli.NoVerdict)
	}
	if rep := res.Report; rep != nil {
		a.print(al.out, rep, rep.Text)
	}
	return code
}
