package telemetry

import (
	"strings"
	"testing"

	"relay/internal/readme"
)

// The README lists every metric, by its Prometheus name (a histogram's
// series add _bucket, _sum and _count to it).
func TestReadmeListsEveryMetric(t *testing.T) {
	counters := map[string]bool{MetricRecordsConsumed: true, MetricRecordsCommitted: true, MetricOutputsCommitted: true,
		MetricTxnCommitted: true, MetricTxnAborted: true, MetricRecordOutcomes: true, MetricReplayOutcomes: true}
	seconds := map[string]bool{MetricCommitLatency: true, MetricEndedDuration: true, MetricOldestAge: true, MetricHeadroom: true}
	text := readme.Text(t)
	for _, name := range []string{MetricRecordsConsumed, MetricRecordsCommitted, MetricOutputsCommitted, MetricTxnCommitted,
		MetricTxnAborted, MetricCommitLatency, MetricAssignedPartitions, MetricRecordOutcomes, MetricEndedAttempts,
		MetricEndedDuration, MetricReplayOutcomes, MetricUnresolved, MetricOldestAge, MetricHeadroom} {
		prom := strings.ReplaceAll(name, ".", "_")
		if seconds[name] {
			prom += "_seconds"
		}
		if counters[name] {
			prom += "_total"
		}
		if !strings.Contains(text, "`"+prom) {
			t.Errorf("README does not list the metric %s", prom)
		}
	}
}
