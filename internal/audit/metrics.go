package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"relay/internal/ledger"
)

// WriteMetrics writes the report as Prometheus text to path, whole or not
// at all (a temporary file renamed into place), for node_exporter's
// textfile collector or any scraper of files: an audit run as a CronJob
// then alerts through the same rules as relay's own metrics.
func (r *Report) WriteMetrics(path string) error {
	var b strings.Builder
	src := r.Source // topic names hold no character %q would escape otherwise than Prometheus
	sum := r.sum()
	b.WriteString("# HELP relay_audit_records Source records of the last audit's window, by what became of them.\n# TYPE relay_audit_records gauge\n")
	for _, c := range []struct {
		state string
		n     int64
	}{
		{"processed", sum.Processed}, {"rejected", sum.Rejected},
		{"quarantined_open", sum.Quarantined[ledger.Open]}, {"quarantined_resolved", sum.Quarantined[ledger.Resolved]},
		{"quarantined_failed_again", sum.Quarantined[ledger.FailedAgain]}, {"quarantined_discarded", sum.Quarantined[ledger.Discarded]},
		{"quarantined_replaying", sum.Quarantined[ledger.Replaying]},
		{"not_consumed", sum.Behind}, {"in_tier", sum.InTier}, {"replaying", sum.InReplay},
	} {
		fmt.Fprintf(&b, "relay_audit_records{source=%q,state=%q} %d\n", src, c.state, c.n)
	}
	b.WriteString("# HELP relay_audit_findings Findings of the last audit, by kind: lost, duplicated and misrouted fail it.\n# TYPE relay_audit_findings gauge\n")
	for _, k := range []Kind{KindLost, KindDuplicated, KindMisrouted, KindUnverifiable} {
		fmt.Fprintf(&b, "relay_audit_findings{source=%q,kind=%q} %d\n", src, k, r.Totals[k])
	}
	clean := 0
	if r.Clean {
		clean = 1
	}
	b.WriteString("# HELP relay_audit_clean 1 when the last audit found nothing lost, duplicated or misrouted.\n# TYPE relay_audit_clean gauge\n")
	fmt.Fprintf(&b, "relay_audit_clean{source=%q} %d\n", src, clean)
	b.WriteString("# HELP relay_audit_timestamp_seconds When the last audit ran.\n# TYPE relay_audit_timestamp_seconds gauge\n")
	fmt.Fprintf(&b, "relay_audit_timestamp_seconds{source=%q} %d\n", src, r.At.Unix())
	tmp, err := os.CreateTemp(filepath.Dir(path), ".relay-audit-*.prom")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(b.String()); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil { //nolint:gosec // metrics are for a scraper to read
		_ = os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
