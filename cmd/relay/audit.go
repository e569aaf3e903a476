package main

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"relay/internal/audit"
	"relay/internal/replay"
)

const auditLong = `Accounts for every source offset of a window: reads, read_committed, the
source range and everything relay writes for it (output, retry tiers,
quarantine, rejected and replay topics, and the ledger in the state topic),
and gives each source record exactly one end state — processed, rejected,
or quarantined (open, resolved, failed-again, discarded, replaying) — or
says it is in flight (not consumed yet, or its latest copy waits in a tier
or the replay topic). Anything else is a finding:

  lost          consumed (below the group's committed offset), with no end
                state and no copy anywhere
  duplicated    more than one end state, or two outputs for one
                relay.message.id (replays included)
  misrouted     a record in relay's topics for the source that names
                another source or partition, or none
  stuck         a copy in a tier or the replay topic that relay has not
                consumed long after it was due (--stuck-after)
  unverifiable  the source record or its end state was deleted by
                retention or compaction: nothing can be said, it is not lost

Aborted records and transaction markers are not findings (read_committed
hides them); they are counted as skipped.

It runs beside a relay that is writing, without disturbing it: its
readers use their own group id (RELAY_GROUP_ID.audit), are assigned, never
subscribed, and it commits and writes nothing.

The window: --from/--to as RFC 3339 times or durations ago (24h), or
--from-offsets/--to-offsets as PARTITION:OFFSET,... (To is exclusive);
unbounded by default (the whole retained source, up to its end).

Exit codes: 0 nothing lost, duplicated or misrouted; 1 a finding of those;
2 bad command line or configuration; 3 the audit could not complete (a
broker away, an ACL missing, a time limit): no verdict. --metrics-file and
--push-url say the outcome of every run, an incomplete one's too.`

type auditLine struct {
	o                  audit.Options
	from, to           string
	fromOffs, toOffs   string
	progress, metrics  string
	pushURL, maxMemory string
	out                output
}

func (a *app) auditCmd() *cobra.Command {
	al := &auditLine{o: audit.Options{Partition: -1}}
	c := &cobra.Command{
		Use:   "audit --source TOPIC [window] [options]",
		Short: "account for every source offset of a window: exit 1 on anything lost, duplicated or misrouted",
		Long:  auditLong,
		RunE: func(c *cobra.Command, args []string) error {
			return status(a.audit(c.Context(), al, args, time.Now()))
		},
	}
	fs := c.Flags()
	fs.StringVar(&al.o.Source, "source", "", "the source topic (required; one of RELAY_SOURCE_TOPICS)")
	fs.StringVar(&al.from, "from", "", "window start: an RFC 3339 time, or a duration ago (24h)")
	fs.StringVar(&al.to, "to", "", "window end (exclusive): an RFC 3339 time, or a duration ago")
	fs.StringVar(&al.fromOffs, "from-offsets", "", "window start per partition: PARTITION:OFFSET,...")
	fs.StringVar(&al.toOffs, "to-offsets", "", "window end per partition (exclusive): PARTITION:OFFSET,...")
	fs.Int32Var(&al.o.Partition, "partition", -1, "audit this source partition only")
	fs.IntVar(&al.o.MaxFindings, "max-findings", 20, "findings listed with their coordinates (all are counted)")
	fs.StringVar(&al.maxMemory, "max-memory", "96MiB", "the most audit state held at once (6 bytes per source offset of the window): partitions are audited in batches that fit; one partition that does not fit stops the audit (exit 3). A size: 96MiB, 1GiB")
	fs.BoolVar(&al.o.AllowUnprinted, "allow-unfingerprinted", false, "credit relay's records without relay.source.fingerprint (written by a relay older than them) to the source offset they name, instead of reporting them misrouted")
	fs.DurationVar(&al.o.ReadTimeout, "read-timeout", audit.DefaultReadTimeout, "how long reading one topic to its end may take before the audit gives up (exit 3)")
	fs.DurationVar(&al.o.StuckAfter, "stuck-after", 0, "report a copy in flight this long past its due time as stuck (default: RELAY_RETRY_MAX_ELAPSED plus the longest tier delay)")
	fs.StringVar(&al.progress, "progress", "auto", "auto (a bar on a terminal), bar or none")
	fs.StringVar(&al.metrics, "metrics-file", "", "also write the result as Prometheus text to this file (node_exporter's textfile collector), an incomplete run's too")
	fs.StringVar(&al.pushURL, "push-url", "", "also push the result to this Prometheus Pushgateway (job relay_audit, grouped by source), an incomplete run's too")
	outputFlag(c, &al.out, false)
	return c
}

// check names every problem of the command line.
func (al *auditLine) check(pos []string, now time.Time) error {
	var errs []error
	if len(pos) > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q", pos[0]))
	}
	if al.o.Source == "" {
		errs = append(errs, errors.New("--source is required"))
	}
	if al.from != "" && al.fromOffs != "" {
		errs = append(errs, errors.New("--from and --from-offsets exclude each other"))
	}
	if al.to != "" && al.toOffs != "" {
		errs = append(errs, errors.New("--to and --to-offsets exclude each other"))
	}
	var err error
	if al.o.FromTime, err = whenOf("--from", al.from, now); err != nil {
		errs = append(errs, err)
	}
	if al.o.ToTime, err = whenOf("--to", al.to, now); err != nil {
		errs = append(errs, err)
	}
	if !al.o.FromTime.IsZero() && !al.o.ToTime.IsZero() && !al.o.FromTime.Before(al.o.ToTime) {
		errs = append(errs, errors.New("--from must be before --to"))
	}
	if al.o.FromOffsets, err = offsetsOf("--from-offsets", al.fromOffs); err != nil {
		errs = append(errs, err)
	}
	if al.o.ToOffsets, err = offsetsOf("--to-offsets", al.toOffs); err != nil {
		errs = append(errs, err)
	}
	if al.o.MaxMemory, err = sizeOf("--max-memory", al.maxMemory); err != nil {
		errs = append(errs, err)
	}
	if al.o.ReadTimeout < 0 {
		errs = append(errs, errors.New("--read-timeout must not be negative"))
	}
	if al.o.StuckAfter < 0 {
		errs = append(errs, errors.New("--stuck-after must not be negative"))
	}
	if al.o.MaxFindings < 0 {
		errs = append(errs, errors.New("--max-findings must not be negative"))
	}
	if al.o.Partition < -1 {
		errs = append(errs, fmt.Errorf("--partition %d: not a partition", al.o.Partition))
	}
	switch al.progress {
	case "auto", "bar", "none":
	default:
		errs = append(errs, fmt.Errorf("--progress %q: not auto, bar or none", al.progress))
	}
	return errors.Join(errs...)
}

// whenOf reads a window bound: an RFC 3339 time or a duration ago.
func whenOf(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%s %q: not an RFC 3339 time (2026-12-01T09:00:00Z) nor a duration ago (24h)", flag, s)
}

// offsetsOf reads PARTITION:OFFSET,...
func offsetsOf(flag, s string) (map[int32]int64, error) {
	if s == "" {
		return nil, nil
	}
	out := map[int32]int64{}
	for _, item := range strings.Split(s, ",") {
		ps, os, ok := strings.Cut(strings.TrimSpace(item), ":")
		p, perr := strconv.ParseInt(ps, 10, 32)
		o, oerr := strconv.ParseInt(os, 10, 64)
		if !ok || perr != nil || oerr != nil || p < 0 || o < 0 {
			return nil, fmt.Errorf("%s %q: not PARTITION:OFFSET,... with numbers of 0 or more", flag, item)
		}
		if _, dup := out[int32(p)]; dup {
			return nil, fmt.Errorf("%s: partition %d given twice", flag, p)
		}
		out[int32(p)] = o
	}
	return out, nil
}

// audit is `relay audit`.
func (a *app) audit(ctx context.Context, al *auditLine, pos []string, now time.Time) int {
	if err := al.check(pos, now); err != nil {
		fmt.Fprintf(a.stderr, "relay audit: %v\n", err)
		return exitUsage
	}
	ops, code := a.setup()
	switch code {
	case exitOK:
	case exitFailure: // the brokers, not the command line
		res := &audit.RunResult{Source: al.o.Source, At: now, Err: errors.New("no admin client")}
		return al.publish(a, res, exitNoVerdict)
	default:
		return code
	}
	defer ops.admin.Close()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	al.o.Now = now
	bar := al.progress == "bar" || (al.progress == "auto" && replay.IsTerminal(a.stderr))
	if bar {
		al.o.Progress = func(read, total int64) {
			pct := 100.0
			if total > 0 {
				pct = min(100, 100*float64(read)/float64(total))
			}
			const width = 30
			n := int(pct / 100 * width)
			fmt.Fprintf(a.stderr, "\raudit [%s%s] %3.0f%% %d records", strings.Repeat("=", n), strings.Repeat(" ", width-n), pct, read)
		}
	}
	rep, err := audit.Run(ctx, ops.cfg, ops.admin, &al.o)
	if bar {
		fmt.Fprintln(a.stderr)
	}
	var in *audit.InputError
	if errors.As(err, &in) {
		fmt.Fprintf(a.stderr, "relay audit: %v\n", err)
		return exitUsage
	}
	res := &audit.RunResult{Source: al.o.Source, At: now, Report: rep, Err: err}
	code = exitOK
	switch {
	case err != nil:
		fmt.Fprintf(a.stderr, "relay audit: could not complete, no verdict: %v\n", err)
		code = exitNoVerdict
	case !rep.Clean:
		code = exitFailure
	}
	return al.publish(a, res, code)
}

// publish writes the run's metrics where asked, prints its report, and
// returns its exit code (code, or exitNoVerdict when the metrics could not
// be written).
func (al *auditLine) publish(a *app, res *audit.RunResult, code int) int {
	if al.metrics != "" {
		if err := res.WriteMetrics(al.metrics); err != nil {
			fmt.Fprintf(a.stderr, "relay audit: --metrics-file: %v\n", err)
			code = max(code, exitNoVerdict)
		}
	}
	if al.pushURL != "" {
		if err := res.Push(al.pushURL); err != nil {
			fmt.Fprintf(a.stderr, "relay audit: --push-url: %v\n", err)
			code = max(code, exitNoVerdict)
		}
	}
	if rep := res.Report; rep != nil {
		a.print(al.out, rep, rep.Text)
	}
	return code
}

// sizeOf reads a size in bytes: a whole number with KiB, MiB or GiB, or
// none (bytes).
func sizeOf(flag, s string) (int64, error) {
	num, unit := s, int64(1)
	for suffix, u := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			num, unit = n, u
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/unit {
		return 0, fmt.Errorf("%s %q: not a size (a whole number of bytes, or with KiB, MiB or GiB: 96MiB)", flag, s)
	}
	return n * unit, nil
}
