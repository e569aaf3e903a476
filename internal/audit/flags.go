package audit

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Line is what `relay audit`'s command line gives as text; Resolve reads
// it into the Options it was bound beside.
type Line struct {
	From, To               string // RFC 3339 times or durations ago
	FromOffsets, ToOffsets string // PARTITION:OFFSET,...
	MaxMemory              string // a size: 96MiB
	Progress               string // auto, bar or none
}

// Bind defines relay audit's flags on fs: into l what Resolve reads, into
// o the rest, and the metrics file and Pushgateway URL.
func (l *Line) Bind(fs *pflag.FlagSet, o *Options, metrics, pushURL *string) {
	fs.StringVar(&o.Source, "source", "", "the source topic (required; one of RELAY_SOURCE_TOPICS)")
	fs.StringVar(&l.From, "from", "", "window start: an RFC 3339 time, or a duration ago (24h)")
	fs.StringVar(&l.To, "to", "", "window end (exclusive): an RFC 3339 time, or a duration ago")
	fs.StringVar(&l.FromOffsets, "from-offsets", "", "window start per partition: PARTITION:OFFSET,...")
	fs.StringVar(&l.ToOffsets, "to-offsets", "", "window end per partition (exclusive): PARTITION:OFFSET,...")
	fs.Int32Var(&o.Partition, "partition", -1, "audit this source partition only")
	fs.BoolVar(&o.Cursor, "cursor", false, "start at the audit's cursor (group RELAY_GROUP_ID.audit's committed offsets; --from where a partition has none yet, else its log start) and end at the cut; then move the cursor past every record judged final")
	fs.IntVar(&o.MaxFindings, "max-findings", 20, "findings listed with their coordinates (all are counted)")
	fs.StringVar(&l.MaxMemory, "max-memory", "96MiB", "the most audit state held at once (6 bytes per source offset of the window): partitions are audited in batches that fit; one partition that does not fit stops the audit (exit 3). A batch's quarantined failures have as much again (133 bytes each); more stop it too. A size: 96MiB, 1GiB")
	fs.BoolVar(&o.AllowUnprinted, "allow-unfingerprinted", false, "credit relay's records without relay.source.fingerprint (written by a relay older than them) to the source offset they name, instead of reporting them misrouted")
	fs.DurationVar(&o.ReadTimeout, "read-timeout", DefaultReadTimeout, "how long reading one topic to its end may take before the audit gives up (exit 3)")
	fs.DurationVar(&o.StuckAfter, "stuck-after", 0, "report a copy in flight this long past its due time as stuck (default: RELAY_RETRY_MAX_ELAPSED plus the longest tier delay)")
	fs.StringVar(&l.Progress, "progress", "auto", "auto (a bar on a terminal), bar or none")
	fs.StringVar(metrics, "metrics-file", "", "also write the result as Prometheus text to this file (node_exporter's textfile collector), an incomplete run's too")
	fs.StringVar(pushURL, "push-url", "", "also push the result to this Prometheus Pushgateway (job relay_audit, grouped by source), an incomplete run's too")
}

// Resolve reads l into o and checks o's own flags, naming every problem
// of the command line (pos: its positional arguments).
func (l *Line) Resolve(o *Options, pos []string, now time.Time) error {
	var errs []error
	if len(pos) > 0 {
		errs = append(errs, fmt.Errorf("unexpected argument %q", pos[0]))
	}
	if o.Source == "" {
		errs = append(errs, errors.New("--source is required"))
	}
	if l.From != "" && l.FromOffsets != "" {
		errs = append(errs, errors.New("--from and --from-offsets exclude each other"))
	}
	if l.To != "" && l.ToOffsets != "" {
		errs = append(errs, errors.New("--to and --to-offsets exclude each other"))
	}
	if o.Cursor && (l.FromOffsets != "" || l.To != "" || l.ToOffsets != "") {
		errs = append(errs, errors.New("--cursor starts at the cursor and ends at the cut: it takes no --to, --from-offsets or --to-offsets (--from starts a partition that has no cursor yet)"))
	}
	var err error
	if o.FromTime, err = WhenOf("--from", l.From, now); err != nil {
		errs = append(errs, err)
	}
	if o.ToTime, err = WhenOf("--to", l.To, now); err != nil {
		errs = append(errs, err)
	}
	if !o.FromTime.IsZero() && !o.ToTime.IsZero() && !o.FromTime.Before(o.ToTime) {
		errs = append(errs, errors.New("--from must be before --to"))
	}
	if o.FromOffsets, err = OffsetsOf("--from-offsets", l.FromOffsets); err != nil {
		errs = append(errs, err)
	}
	if o.ToOffsets, err = OffsetsOf("--to-offsets", l.ToOffsets); err != nil {
		errs = append(errs, err)
	}
	if o.MaxMemory, err = SizeOf("--max-memory", l.MaxMemory); err != nil {
		errs = append(errs, err)
	}
	for flag, d := range map[string]time.Duration{"--read-timeout": o.ReadTimeout, "--stuck-after": o.StuckAfter} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", flag))
		}
	}
	if o.MaxFindings < 0 {
		errs = append(errs, errors.New("--max-findings must not be negative"))
	}
	if o.Partition < -1 {
		errs = append(errs, fmt.Errorf("--partition %d: not a partition", o.Partition))
	}
	switch l.Progress {
	case "auto", "bar", "none":
	default:
		errs = append(errs, fmt.Errorf("--progress %q: not auto, bar or none", l.Progress))
	}
	return errors.Join(errs...)
}

// WhenOf reads a window bound: an RFC 3339 time or a duration ago.
func WhenOf(flag, s string, now time.Time) (time.Time, error) {
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

// OffsetsOf reads PARTITION:OFFSET,...
func OffsetsOf(flag, s string) (map[int32]int64, error) {
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

// SizeOf reads a size in bytes: a whole number with KiB, MiB or GiB, or
// none (bytes).
func SizeOf(flag, s string) (int64, error) {
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

// Bar is a progress bar on w, redrawn in place (a terminal's).
func Bar(w io.Writer) func(read, total int64) {
	return func(read, total int64) {
		pct := 100.0
		if total > 0 {
			pct = min(100, 100*float64(read)/float64(total))
		}
		const width = 30
		n := int(pct / 100 * width)
		fmt.Fprintf(w, "\raudit [%s%s] %3.0f%% %d records", strings.Repeat("=", n), strings.Repeat(" ", width-n), pct, read)
	}
}
