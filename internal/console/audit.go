package console

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// auditResult is the last `relay audit` of a source, from the file its
// --metrics-file writes.
type auditResult struct {
	Clean bool
	// Incomplete: the last audit could not complete, and gave no verdict.
	Incomplete bool
	At         time.Time
	Findings   map[string]int64
}

// When renders the audit's time.
func (a *auditResult) When() string { return a.At.UTC().Format(time.RFC3339) }

// readAudit reads the audit's Prometheus text file by source; a missing
// file is no audit yet.
func readAudit(path string) (map[string]*auditResult, error) {
	out := map[string]*auditResult{}
	if path == "" {
		return out, nil
	}
	f, err := os.Open(path) //nolint:gosec // the operator names the file
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	defer func() { _ = f.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(f)
	if err != nil {
		return out, err
	}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			value := m.GetGauge().GetValue() + m.GetUntyped().GetValue() + m.GetCounter().GetValue()
			src := labels["source"]
			a := out[src]
			if a == nil {
				a = &auditResult{Findings: map[string]int64{}}
				out[src] = a
			}
			switch name {
			case "relay_audit_clean":
				a.Clean = value == 1
			case "relay_audit_timestamp_seconds":
				a.At = time.Unix(int64(value), 0)
			case "relay_audit_findings":
				a.Findings[labels["kind"]] = int64(value)
			case "relay_audit_outcome":
				if labels["outcome"] == "incomplete" {
					a.Incomplete = value == 1
				}
			}
		}
	}
	return out, nil
}
