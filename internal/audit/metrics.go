package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"relay/internal/ledger"
)

// Outcomes of an audit run, as relay_audit_outcome says them.
const (
	OutcomeClean      = "clean"
	OutcomeFindings   = "findings"
	OutcomeIncomplete = "incomplete" // the audit could not complete: no verdict
)

// RunResult is one audit run as its metrics say it: its report, or the error
// that kept it from completing.
type RunResult struct {
	Source string
	At     time.Time
	Report *Report // nil when Err is set
	Err    error
	// LastSuccess is when an audit of Source last completed, before this
	// run (zero: never, or not known).
	LastSuccess time.Time
	// OldestUnjudged is what the last completed --cursor audit said of
	// the oldest record not judged final (zero: not known), carried by
	// a run that did not complete.
	OldestUnjudged time.Time
}

// Outcome is the run's outcome: clean, findings or incomplete.
func (r *RunResult) Outcome() string {
	switch {
	case r.Err != nil || r.Report == nil:
		return OutcomeIncomplete
	case r.Report.Clean:
		return OutcomeClean
	}
	return OutcomeFindings
}

// Registry holds the run's metrics. Every run says when it ran, when an
// audit last completed, and its outcome; only a completed run says what it
// counted, and only a clean one sets relay_audit_clean to 1, so a run that
// failed never leaves an earlier clean in place.
func (r *RunResult) Registry() *prometheus.Registry { return r.registry(true) }

// registry is Registry, each series labelled with the source or not: a
// Pushgateway refuses a pushed series that carries a grouping label
// (source is one) and adds it itself.
func (r *RunResult) registry(withSource bool) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	var names []string
	if withSource {
		names = []string{"source"}
	}
	// lbl is the labels of a series: the source (when it is a label) and kv.
	lbl := func(kv ...string) prometheus.Labels {
		l := prometheus.Labels{}
		if withSource {
			l["source"] = r.Source
		}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	src := lbl()
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, append(slices.Clone(names), labels...))
		reg.MustRegister(g)
		return g
	}
	lastRun := gauge("relay_audit_last_run_timestamp_seconds", "When the last audit ran, whatever its outcome.")
	lastRun.With(src).Set(float64(r.At.Unix()))
	lastSuccess := gauge("relay_audit_last_success_timestamp_seconds", "When an audit last completed (clean or with findings); 0: never.")
	success := r.LastSuccess
	if r.Outcome() != OutcomeIncomplete {
		success = r.At
	}
	if !success.IsZero() {
		lastSuccess.With(src).Set(float64(success.Unix()))
	} else {
		lastSuccess.With(src).Set(0)
	}
	outcome := gauge("relay_audit_outcome", "1 for the last audit's outcome: clean, findings (lost, duplicated, misrouted or stuck), or incomplete (no verdict).", "outcome")
	for _, o := range []string{OutcomeClean, OutcomeFindings, OutcomeIncomplete} {
		v := 0.0
		if o == r.Outcome() {
			v = 1
		}
		outcome.With(lbl("outcome", o)).Set(v)
	}
	clean := gauge("relay_audit_clean", "1 when the last audit completed and found nothing lost, duplicated, misrouted or stuck; 0 otherwise, an incomplete audit included.")
	clean.With(src).Set(0)
	ts := gauge("relay_audit_timestamp_seconds", "When the last audit ran (relay_audit_last_run_timestamp_seconds, kept for existing rules).")
	ts.With(src).Set(float64(r.At.Unix()))
	rep := r.Report
	oldest := r.OldestUnjudged
	if rep != nil && rep.OldestUnjudged != nil && r.Outcome() != OutcomeIncomplete {
		oldest = *rep.OldestUnjudged
	}
	if !oldest.IsZero() {
		gauge("relay_audit_oldest_unjudged_timestamp_seconds", "With --cursor: the source time of the oldest record the audit has not judged final yet (at its cursor), or of the last cut when every record before it was judged; an incomplete run keeps the last completed run's value.").
			With(src).Set(float64(oldest.Unix()))
	}
	if r.Outcome() == OutcomeIncomplete {
		return reg
	}
	if rep.OldestUnjudged != nil {
		gauge("relay_audit_unjudged_records", "With --cursor: records from the cursor to the last completed audit's cut, not judged final yet (in flight).").
			With(src).Set(float64(rep.Unjudged))
	}
	if rep.Clean {
		clean.With(src).Set(1)
	}
	records := gauge("relay_audit_records", "Source records of the last completed audit's window, by what became of them.", "state")
	sum := rep.sum()
	for _, c := range []struct {
		state string
		n     int64
	}{
		{"processed", sum.Processed}, {"rejected", sum.Rejected},
		{"quarantined_open", sum.Quarantined[ledger.Open]}, {"quarantined_resolved", sum.Quarantined[ledger.Resolved]},
		{"quarantined_failed_again", sum.Quarantined[ledger.FailedAgain]}, {"quarantined_discarded", sum.Quarantined[ledger.Discarded]},
		{"quarantined_replaying", sum.Quarantined[ledger.Replaying]},
		{"not_consumed", sum.Behind}, {"in_tier", sum.InTier}, {"replaying", sum.InReplay}, {"parked", sum.Parked},
	} {
		records.With(lbl("state", c.state)).Set(float64(c.n))
	}
	findings := gauge("relay_audit_findings", "Findings of the last completed audit, by kind: lost, duplicated, misrouted and stuck fail it; unverifiable does not.", "kind")
	for _, k := range []Kind{KindLost, KindDuplicated, KindMisrouted, KindStuck, KindUnverifiable} {
		findings.With(lbl("kind", string(k))).Set(float64(rep.Totals[k]))
	}
	return reg
}

// Publish writes the run's metrics to file and pushes them to the
// Pushgateway at push, each only when given; the error names the flag of
// each that failed.
func (r *RunResult) Publish(file, push string) error {
	var errs []error
	if file != "" {
		if err := r.WriteMetrics(file); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-file: %w", err))
		}
	}
	if push != "" {
		if err := r.Push(push); err != nil {
			errs = append(errs, fmt.Errorf("--push-url: %w", err))
		}
	}
	return errors.Join(errs...)
}

// WriteMetrics writes the run's metrics to path as Prometheus text, whole
// or not at all, for node_exporter's textfile collector. The last success
// is carried over from the file the previous run wrote there.
func (r *RunResult) WriteMetrics(path string) error {
	if r.LastSuccess.IsZero() {
		prev, err := LastSuccessIn(path, r.Source)
		if err != nil {
			return err
		}
		r.LastSuccess = prev
	}
	if r.OldestUnjudged.IsZero() {
		prev, err := gaugeIn(path, "relay_audit_oldest_unjudged_timestamp_seconds", r.Source)
		if err != nil {
			return err
		}
		r.OldestUnjudged = prev
	}
	if err := prometheus.WriteToTextfile(path, r.Registry()); err != nil {
		return err
	}
	return os.Chmod(path, 0o644) //nolint:gosec // metrics are for a scraper to read
}

// Push sends the run's metrics to a Prometheus Pushgateway at url, under
// job relay_audit and the source as a grouping label; the last success is
// the one given (a Pushgateway keeps what the previous push left, which
// Push replaces).
func (r *RunResult) Push(url string) error {
	return push.New(url, "relay_audit").Grouping("source", r.Source).Gatherer(r.registry(false)).Push()
}

// LastSuccessIn reads relay_audit_last_success_timestamp_seconds of source
// from the metrics file at path; zero when the file or the sample is not
// there.
func LastSuccessIn(path, source string) (time.Time, error) {
	return gaugeIn(path, "relay_audit_last_success_timestamp_seconds", source)
}

// gaugeIn reads the timestamp gauge name of source from the metrics file
// at path; zero when the file or the sample is not there.
func gaugeIn(path, name, source string) (time.Time, error) {
	f, err := os.Open(path) //nolint:gosec // the operator names the file
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	defer func() { _ = f.Close() }()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		return time.Time{}, nil //nolint:nilerr // an unreadable old file says nothing; it is replaced
	}
	fam := fams[name]
	if fam == nil {
		return time.Time{}, nil
	}
	for _, m := range fam.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "source" && l.GetValue() == source && m.GetGauge().GetValue() > 0 {
				return time.Unix(int64(m.GetGauge().GetValue()), 0), nil
			}
		}
	}
	return time.Time{}, nil
}
