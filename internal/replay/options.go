package replay

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"relay/internal/quarantine"
	"relay/internal/secret"
)

// Options is one `relay replay`: what to select and how to publish it.
type Options struct {
	Reason string
	// Actor is who replays, as the ledger records it.
	Actor string
	// IDs are failure ids, comma-separated (these may be failed-again).
	IDs    string
	Filter quarantine.Spec
	// All selects every open failure.
	All bool
	// IncludeFailedAgain and IncludeReplaying add failures in those
	// states to the open ones.
	IncludeFailedAgain, IncludeReplaying bool
	DryRun                               bool
	// Sample is about how many records go first, alone (0: none).
	Sample int
	// SampleOnly publishes the sample and not the rest: the operator
	// looks at its outcomes, then replays the rest (the sample's resolved
	// failures are skipped then).
	SampleOnly bool
	// Rate is records per second at most.
	Rate float64
	// MaxFailureRate is the share of known outcomes that may fail again;
	// it applies after the sample, or once MinOutcomes are known.
	MaxFailureRate float64
	MinOutcomes    int
	// Wait bounds the wait for outcomes.
	Wait time.Duration
	// MaxReplayLag stops a replay once relay's lag on the replay topic
	// is above it and still rising (0: not watched); MaxDuplicates once
	// more copies of settled failures came back; MaxHookTimeouts once the
	// hook timed out more often on the relay instances WatchMetrics names.
	MaxReplayLag    int64
	MaxDuplicates   int
	MaxHookTimeouts int
	WatchMetrics    []string

	filter *quarantine.Filter
}

// Defaults are the options a command line starts from.
func Defaults() Options {
	return Options{Filter: quarantine.Spec{Partition: -1}, Rate: 50, MaxFailureRate: 0.5, MinOutcomes: 10, Wait: 5 * time.Minute,
		MaxReplayLag: 1000, MaxHookTimeouts: 10}
}

// Check names every problem of the options, and makes the selection's
// filter at now.
func (o *Options) Check(now time.Time) error {
	var errs []error
	if strings.TrimSpace(o.Reason) == "" {
		errs = append(errs, errors.New("--reason is required: say why (a fix was deployed, a dependency recovered)"))
	}
	if math.IsNaN(o.Rate) || o.Rate <= 0 || o.Rate > 10000 {
		errs = append(errs, fmt.Errorf("--rate %g: must be above 0 and at most 10000 records per second", o.Rate))
	}
	if o.SampleOnly && o.Sample <= 0 {
		errs = append(errs, errors.New("--sample-only needs --sample N"))
	}
	if o.Sample < 0 {
		errs = append(errs, fmt.Errorf("--sample %d: must be 0 (none) or more", o.Sample))
	}
	if math.IsNaN(o.MaxFailureRate) || o.MaxFailureRate < 0 || o.MaxFailureRate > 1 {
		errs = append(errs, fmt.Errorf("--max-failure-rate %g: must be between 0 and 1", o.MaxFailureRate))
	}
	if o.MinOutcomes < 1 {
		errs = append(errs, fmt.Errorf("--min-outcomes %d: must be at least 1", o.MinOutcomes))
	}
	if o.MaxReplayLag < 0 {
		errs = append(errs, fmt.Errorf("--max-replay-lag %d: must be 0 (not watched) or more", o.MaxReplayLag))
	}
	if o.MaxDuplicates < 0 {
		errs = append(errs, fmt.Errorf("--max-duplicates %d: must be 0 or more", o.MaxDuplicates))
	}
	if o.MaxHookTimeouts < 0 {
		errs = append(errs, fmt.Errorf("--max-hook-timeouts %d: must be 0 or more", o.MaxHookTimeouts))
	}
	for _, u := range o.WatchMetrics {
		if x, err := url.Parse(u); err != nil || (x.Scheme != "http" && x.Scheme != "https") || x.Host == "" {
			errs = append(errs, fmt.Errorf("--watch-metrics %q: not an http(s) URL of relay's /metrics", secret.MaskURL(u)))
		}
	}
	if o.Wait <= 0 {
		errs = append(errs, fmt.Errorf("--wait %s: must be positive", o.Wait))
	}
	f, err := o.Filter.Build(now)
	if err != nil {
		errs = append(errs, err)
	}
	// States are judged by Choose, so that skips are counted.
	f.States = nil
	if ids := quarantine.SplitList(o.IDs); len(ids) > 0 {
		f.IDs = map[string]bool{}
		for _, id := range ids {
			if _, _, _, err := quarantine.ParseFailureID(id); err != nil {
				errs = append(errs, err)
			}
			f.IDs[id] = true
		}
	}
	if !o.All && !f.Narrowed() {
		errs = append(errs, errors.New("no selection: give --ids, --code, --schema-version, --since/--until, --min-age/--max-age, --source, --partition, or --all"))
	}
	o.filter = f
	return errors.Join(errs...)
}

// NewID names a replay started at now.
func NewID(now time.Time) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "rp-" + now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}
