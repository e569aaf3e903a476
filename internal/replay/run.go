package replay

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.opentelemetry.io/otel/trace"

	"relay/internal/config"
	"relay/internal/kafkaclient"
	"relay/internal/ledger"
	"relay/internal/quarantine"
	"relay/internal/statetopic"
)

// Status is how a replay ended.
type Status int

// How a replay ends.
const (
	Done        Status = iota // every outcome known (they are in the result)
	Stopped                   // the repeat-failure threshold stopped it
	Incomplete                // published, but not every outcome is known within Wait
	Interrupted               // ctx ended
	Failed                    // a runtime failure (Err)
)

// Counts is a replay's progress.
type Counts struct {
	Published   int `json:"published"`
	Total       int `json:"selected"`
	Resolved    int `json:"resolved"`
	Rejected    int `json:"rejected"`
	FailedAgain int `json:"failedAgain"`
	Duplicate   int `json:"duplicate"`
	Pending     int `json:"outcomeUnknown"`
}

// Progress is told of a replay's progress as it goes, and once at its end.
type Progress interface {
	Update(Counts)
	Done(Counts)
}

// Result is a replay's summary.
type Result struct {
	ReplayID string `json:"replayId"`
	Actor    string `json:"actor"`
	Reason   string `json:"reason"`
	Counts
	Skipped map[string]int `json:"skipped"`
	// Late counts selected failures left alone because someone changed
	// them during the replay, by their new state.
	Late map[string]int `json:"changedDuringReplay,omitempty"`
	// Note says why it stopped, failed or is incomplete.
	Note     string            `json:"stopped,omitempty"`
	Outcomes map[string]string `json:"outcomes"`
	Status   Status            `json:"-"`
	Err      error             `json:"-"`
}

// run is one replay in progress.
type run struct {
	cfg       *config.Config
	o         *Options
	id        string
	w         *statetopic.Writer
	tail      *kafka.Consumer
	prog      Progress
	total     int
	published int
	// outcomes: failure id → resolved, rejected, failed-again, duplicate;
	// pending: published, outcome not known yet; changed: selected
	// failures someone else changed since the snapshot (a discard, another
	// replay), which this replay leaves alone.
	outcomes    map[string]string
	tally       map[string]int // outcomes counted by kind, as they settle
	pending     map[string]bool
	changed     map[string]string
	skippedLate map[string]int
	tracer      trace.Tracer // nil: no send spans
	guard       *guard
}

// Run publishes the plan's selection (the sample first, then its
// outcomes, then the rest), follows the outcomes, and stops at the
// repeat-failure threshold. It tells log what it starts and prog how it
// goes. id names the replay (NewID). An error means nothing was published.
func (p *Plan) Run(ctx context.Context, o *Options, id string, log io.Writer, prog Progress) (*Result, error) {
	sel := p.Selection
	r := &run{cfg: p.cfg, o: o, id: id, w: p.w, prog: prog, total: len(sel.Records), outcomes: map[string]string{}, tally: map[string]int{},
		pending: map[string]bool{}, changed: map[string]string{}, skippedLate: map[string]int{}, tracer: p.traces.Tracer("relay/internal/replay")}
	res := &Result{ReplayID: id, Actor: o.Actor, Reason: o.Reason, Skipped: sel.Skipped, Outcomes: r.outcomes, Late: r.skippedLate}
	var err error
	if r.tail, err = openTail(p.cfg, p.Snapshot.StateEnds); err != nil {
		return nil, err
	}
	defer func() { _ = r.tail.Close() }()
	r.guard = &guard{o: o, group: p.cfg.GroupID, parts: map[string]map[int32]bool{}, baseline: map[string]float64{}, began: time.Now(),
		http: &http.Client{Timeout: 2 * time.Second}, scrapeErr: map[string]bool{},
		warn: func(format string, args ...any) { fmt.Fprintf(log, "warning: "+format+"\n", args...) }}
	if o.MaxReplayLag > 0 {
		// read_uncommitted: the committed offsets as they are, without
		// waiting for relay's open transactions (require_stable), which
		// take longest exactly when relay struggles.
		if c, err := kafkaclient.Reader(p.cfg, p.cfg.GroupID, kafkaclient.Read{Uncommitted: true}); err == nil {
			r.guard.offsets = c
			defer func() { _ = c.Close() }()
		} else {
			fmt.Fprintf(log, "warning: the replay topic's lag is not watched: %v\n", err)
		}
	}
	if len(o.WatchMetrics) > 0 {
		r.guard.scrape(ctx) // the baseline
		r.guard.scrapeAt = time.Now()
	}
	first, rest := Sample(sel.Records, o.Sample)
	if o.SampleOnly {
		r.total, rest = len(first), nil
	}
	fmt.Fprintf(log, "replay %s by %s (%s): %d records at %g/s%s\n", id, o.Actor, o.Reason, r.total, o.Rate, Skips(sel.Skipped))
	fmt.Fprintf(log, "it stops on: %s\n", strings.Join(o.Watching(), "; "))
	status, why := Done, ""
	if len(rest) > 0 {
		fmt.Fprintf(log, "sample: %d records first\n", len(first))
		status, why, err = r.sampleFirst(ctx, first, rest)
	} else {
		why, err = r.publish(ctx, first, true)
	}
	r.finish(ctx, res, status, why, err)
	return res, nil
}

// sampleFirst publishes the sample, waits for its outcomes, and publishes
// the rest unless they passed the threshold.
func (r *run) sampleFirst(ctx context.Context, first, rest []*quarantine.Failure) (Status, string, error) {
	why, err := r.publish(ctx, first, false)
	if err != nil || why != "" {
		return Done, why, err
	}
	if done, why := r.await(ctx, true); why != "" {
		return Stopped, why, nil
	} else if !done {
		return Incomplete, "the sample's outcomes are not all known within --wait; the rest was not published", nil
	}
	if rate, n := r.failureRate(); n > 0 && rate > r.o.MaxFailureRate {
		return Stopped, fmt.Sprintf("the sample's repeat-failure rate %.0f%% (%d of %d) passed --max-failure-rate %.0f%%",
			100*rate, r.tally[string(ledger.FailedAgain)], n, 100*r.o.MaxFailureRate), nil
	}
	why, err = r.publish(ctx, rest, true)
	return Done, why, err
}

// finish waits for the outcomes still unknown, unless the replay failed,
// stopped or was interrupted, and fills in the result.
func (r *run) finish(ctx context.Context, res *Result, status Status, why string, err error) {
	defer func() { res.Counts = r.counts() }()
	switch {
	case err != nil:
		r.prog.Done(r.counts())
		res.Status, res.Err, res.Note = Failed, err, "failed: "+err.Error()
		return
	case ctx.Err() != nil:
		r.prog.Done(r.counts())
		res.Status, res.Note = Interrupted, fmt.Sprintf("interrupted: %d of %d published (committed, replaying in the ledger); the rest was not published and stays as it was",
			r.published, r.total)
		return
	case status == Done && why != "":
		status = Stopped
	}
	if status == Done {
		// Everything is published: the stop conditions have nothing
		// left to stop; the outcomes are waited for.
		if done, _ := r.await(ctx, false); !done && ctx.Err() == nil {
			status, why = Incomplete, fmt.Sprintf("outcomes of %d replayed records are not known within --wait %s: is relay running for group %s? They stay replaying in the ledger",
				len(r.pending), r.o.Wait, r.cfg.GroupID)
		}
	}
	r.prog.Done(r.counts())
	if ctx.Err() != nil {
		res.Status, res.Note = Interrupted, fmt.Sprintf("interrupted while waiting for outcomes: %d published; the outcomes of %d are not known yet (they stay replaying until relay settles them)",
			r.published, len(r.pending))
		return
	}
	if status == Stopped {
		why = "stopped: " + why + fmt.Sprintf("; %d selected records were not published and stay as they were", r.total-r.published)
	}
	res.Status, res.Note = status, why
}

func (r *run) counts() Counts {
	return Counts{Published: r.published, Total: r.total, Resolved: r.tally[string(ledger.Resolved)], Rejected: r.tally[string(ledger.OutcomeRejected)],
		FailedAgain: r.tally[string(ledger.FailedAgain)], Duplicate: r.tally[string(ledger.OutcomeDuplicate)], Pending: len(r.pending)}
}
