package reference

import (
	"strings"

	"relay/internal/config"
	"relay/internal/ledger"
	"relay/internal/pipeline"
	"relay/internal/telemetry"
)

// labelValues lists, by metric and label, the values a label takes, where
// they are a fixed set.
func labelValues() map[string]map[string][]string {
	ended := []string{pipeline.OutcomeProcessed, pipeline.OutcomeQuarantined, pipeline.OutcomeRejected}
	return map[string]map[string][]string{
		telemetry.MetricRecordOutcomes: {"outcome": {pipeline.OutcomeProcessed, pipeline.OutcomeRetry, pipeline.OutcomeQuarantined, pipeline.OutcomeRejected}},
		telemetry.MetricEndedAttempts:  {"outcome": ended},
		telemetry.MetricEndedDuration:  {"outcome": ended},
		telemetry.MetricReplayOutcomes: {"outcome": {str(ledger.Resolved), str(ledger.FailedAgain), str(ledger.OutcomeDuplicate)}},
	}
}

// promName is the Prometheus name of the instrument name.
func promName(name string) string {
	for _, m := range telemetry.Instruments {
		if m.Name == name {
			return m.PrometheusName()
		}
	}
	return name
}

// metrics renders telemetry.Instruments.
func metrics(d *doc) {
	d.para("On `" + config.EnvHTTPAddr + "` `/metrics`, in Prometheus text, and over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` " +
		"is set. A histogram's series add `_bucket`, `_sum` and `_count` to its name. The `code` label is a failure code " +
		"(empty when processed).")
	values := labelValues()
	rows := make([][]string, 0, len(telemetry.Instruments))
	for _, m := range telemetry.Instruments {
		labels := make([]string, len(m.Labels))
		for i, l := range m.Labels {
			labels[i] = code(l)
			if v := values[m.Name][l]; len(v) > 0 {
				labels[i] += " (" + codes(v...) + ")"
			}
		}
		meaning := m.Help
		if m.Note != "" {
			meaning += ". " + m.Note
		}
		if len(labels) == 0 {
			labels = []string{"—"}
		}
		rows = append(rows, []string{code(m.PrometheusName()), string(m.Kind), strings.Join(labels, ", "), meaning})
	}
	d.table([]string{"metric", "type", "labels", "meaning"}, rows)
}
