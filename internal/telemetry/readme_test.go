package telemetry

import (
	"os"
	"strings"
	"testing"
)

// The README lists every metric, by its Prometheus name.
func TestReadmeListsEveryMetric(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	counters := map[string]bool{MetricRecordsConsumed: true, MetricRecordsCommitted: true, MetricOutputsCommitted: true,
		MetricTxnCommitted: true, MetricTxnAborted: true, MetricRecordOutcomes: true, MetricReplayOutcomes: true}
	seconds := map[string]bool{MetricCommitLatency: true, MetricEndedDuration: true, MetricOldestAge: true, MetricHeadroom: true}
	for _, name := range []string{MetricRecordsConsumed, MetricRecordsCommitted, MetricOutputsCommitted, MetricTxnCommitted,
		MetricTxnAborted, MetricCommitLatency, MetricAssignedPartitons, MetricRecordOutcomes, MetricEndedAttempts,
		MetricEndedDuration, MetricReplayOutcomes, MetricUnresolved, MetricOldestAge, MetricHeadroom} {
		prom := strings.ReplaceAll(name, ".", "_")
		if seconds[name] {
			prom += "_seconds"
		}
		if counters[name] {
			prom += "_total"
		}
		if !strings.Contains(string(b), "`"+prom) {
			t.Errorf("README does not list the metric %s", prom)
		}
	}
}
