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
		Short: "account for every source offset of a window: exit 1 on anything lost, duplicated or misrouted",
		Long:  audit.Help,
		RunE: func(c *cobra.Command, args []string) error {
			return cli.Status(a.audit(c.Context(), al, args, time.Now()))
		},
	}
	fs := c.Flags()
	fs.StringVar(&al.o.Source, "source", "", "the source topic (required; one of RELAY_SOURCE_TOPICS)")
	fs.StringVar(&al.l.From, "from", "", "window start: an RFC 3339 time, or a duration ago (24h)")
	fs.StringVar(&al.l.To, "to", "", "window end (exclusive): an RFC 3339 time, or a duration ago")
	fs.StringVar(&al.l.FromOffsets, "from-offsets", "", "window start per partition: PARTITION:OFFSET,...")
	fs.StringVar(&al.l.ToOffsets, "to-offsets", "", "window end per partition (exclusive): PARTITION:OFFSET,...")
	fs.Int32Var(&al.o.Partition, "partition", -1, "audit this source partition only")
	fs.BoolVar(&al.o.Cursor, "cursor", false, "start at the audit's cursor (group RELAY_GROUP_ID.audit's committed offsets; --from where a partition has none yet, else its log start) and end at the cut; then move the cursor past every record judged final")
	fs.IntVar(&al.o.MaxFindings, "max-findings", 20, "findings listed with their coordinates (all are counted)")
	fs.StringVar(&al.l.MaxMemory, "max-memory", "96MiB", "the most audit state held at once (6 bytes per source offset of the window): partitions are audited in batches that fit; one partition that does not fit stops the audit (exit 3). A batch's quarantined failures have as much again (133 bytes each); more stop it too. A size: 96MiB, 1GiB")
	fs.BoolVar(&al.o.AllowUnprinted, "allow-unfingerprinted", false, "credit relay's records without relay.source.fingerprint (written by a relay older than them) to the source offset they name, instead of reporting them misrouted")
	fs.DurationVar(&al.o.ReadTimeout, "read-timeout", audit.DefaultReadTimeout, "how long reading one topic to its end may take before the audit gives up (exit 3)")
	fs.DurationVar(&al.o.StuckAfter, "stuck-after", 0, "report a copy in flight this long past its due time as stuck (default: RELAY_RETRY_MAX_ELAPSED plus the longest tier delay)")
	fs.StringVar(&al.l.Progress, "progress", "auto", "auto (a bar on a terminal), bar or none")
	fs.StringVar(&al.metrics, "metrics-file", "", "also write the result as Prometheus text to this file (node_exporter's textfile collector), an incomplete run's too")
	fs.StringVar(&al.pushURL, "push-url", "", "also push the result to this Prometheus Pushgateway (job relay_audit, grouped by source), an incomplete run's too")
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
