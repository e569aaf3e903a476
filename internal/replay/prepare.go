package replay

import (
	"context"
	"log/slog"
	"os"
	"time"

	"relay/internal/config"
	"relay/internal/quarantine"
	"relay/internal/statetopic"
	"relay/internal/topics"
	"relay/internal/tracing"
)

// Plan is a replay ready to run or to predict: the snapshot that keeps the
// selected records' bytes, the selection, and (unless a dry run) the
// writer that fenced earlier replays of the group.
type Plan struct {
	cfg       *config.Config
	Snapshot  *quarantine.Snapshot
	Selection *Selection
	w         *statetopic.Writer
	// traces makes the replay's send spans (none without tracing).
	traces *tracing.Provider
}

// Prepare reads the ledger and the quarantine and selects. The bytes of
// the selected records only are read, on a second read. Unless o is a dry
// run, an earlier replay of the group is fenced before that second read:
// its last transaction is then committed or aborted, and the snapshot
// sees its changes (or that there are none). An empty selection is
// returned as it is, with nothing fenced. A bad selection is an
// *quarantine.InputError.
func Prepare(ctx context.Context, cfg *config.Config, a topics.Admin, o *Options, now time.Time) (*Plan, error) {
	p := &Plan{cfg: cfg}
	if err := quarantine.CheckSource(cfg, o.filter.Source); err != nil {
		return nil, &quarantine.InputError{Err: err}
	}
	// The selection is made on an index of the quarantine (about 160
	// bytes a failure); only the failures it selects are read whole.
	r := quarantine.NewReader(cfg, a, "")
	if err := r.CatchUp(ctx); err != nil {
		return nil, err
	}
	chosen, skipped, err := chooseIDs(r.Index(), o, now)
	if err != nil {
		return nil, err
	}
	if len(chosen) == 0 {
		p.Snapshot, p.Selection = &quarantine.Snapshot{Warning: r.Index().Warning()}, &Selection{Skipped: skipped}
		return p, nil
	}
	if !o.DryRun {
		traces, err := tracing.New(ctx, os.Environ(), "")
		if err != nil {
			return nil, &quarantine.InputError{Err: err}
		}
		p.traces = traces
		if traces.Enabled() {
			tracing.LogErrors(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		}
		w, err := statetopic.NewWriter(ctx, cfg, cfg.GroupID+".replay")
		if err != nil {
			p.Close()
			return nil, err
		}
		p.w = w
	}
	// The second read sees what an earlier replay, fenced above, did to
	// them; failures quarantined since the first are not taken.
	s, err := quarantine.Load(ctx, cfg, a, func(id string) bool { return chosen[id] })
	if err != nil {
		p.Close()
		return nil, err
	}
	if s.Warning == nil {
		s.Warning = r.Index().Warning()
	}
	p.Snapshot, p.Selection = s, chooseFrom(s, o, now, skipped)
	return p, nil
}

// Close releases the writer, if any.
func (p *Plan) Close() {
	if p.w != nil {
		p.w.Close()
		p.w = nil
	}
	// The send spans go out before the command ends, if they can
	// within 5 s.
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.traces.Shutdown(c)
	p.traces = nil
}
