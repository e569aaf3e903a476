package telemetry

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"relay/internal/buildinfo"
	"relay/internal/ledger"
)

// zero creates the series a dashboard or an absent() alert expects from
// the start, at 0: the counters without labels, and the record outcomes
// with no code (processed records have none; the others get theirs when
// they first happen).
func (m *Metrics) zero() {
	ctx := context.Background()
	for _, c := range []metric.Int64Counter{m.committed, m.outputs, m.txns, m.hookTimeouts} {
		c.Add(ctx, 0)
	}
	for _, o := range ledger.RecordOutcomes {
		m.outcomes.Add(ctx, 0, metric.WithAttributes(attribute.String("outcome", string(o)), attribute.String("code", "")))
	}
}

// buildInfo registers relay_build_info: 1, labelled with the build.
func buildInfo(meter metric.Meter) error {
	labels := metric.WithAttributes(
		attribute.String("version", buildinfo.Version), attribute.String("commit", buildinfo.Commit),
		attribute.String("go_version", buildinfo.GoVersion()), attribute.String("librdkafka_version", buildinfo.Librdkafka()))
	_, err := meter.Int64ObservableGauge(MetricBuildInfo, describe(MetricBuildInfo),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(1, labels)
			return nil
		}))
	return err
}

// maxCodeLabels bounds the code label's values. relay's own codes are a
// few dozen; a hook's rejection codes and a rules file's names are the
// user's, and could be many.
const maxCodeLabels = 100

// OtherCode is the code label of the codes past the bound.
const OtherCode = "other"

// codeLabels keeps the code label's cardinality bounded: the first max
// distinct codes are their own label value, every later one is "other".
type codeLabels struct {
	mu   sync.Mutex
	seen map[string]bool
	max  int
}

func newCodeLabels(max int) *codeLabels { return &codeLabels{seen: map[string]bool{}, max: max} }

// label is the label value of code.
func (c *codeLabels) label(code string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[code] {
		return code
	}
	if len(c.seen) >= c.max {
		return OtherCode
	}
	c.seen[code] = true
	return code
}
