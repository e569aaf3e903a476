package audit

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Line is what `relay audit`'s command line gives as text; Resolve reads
// it into the Options it was bound beside.
type Line struct {
	From, To               string // RFC 3339 times or durations ago
	FromOffsets, ToOffsets string // PARTITION:OFFSET,...
	MaxMemory              string // a size: 96MiB
	Progress               string // auto, bar or none
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
