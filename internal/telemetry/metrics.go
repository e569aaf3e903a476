package telemetry

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Metric names, as Prometheus shows them (OTel adds the _total suffix to
// counters and the unit suffix to histograms).
const (
	MetricRecordsConsumed   = "relay.records.consumed"
	MetricRecordsCommitted  = "relay.records.committed"
	MetricOutputsCommitted  = "relay.outputs.committed"
	MetricTxnCommitted      = "relay.transactions.committed"
	MetricTxnAborted        = "relay.transactions.aborted"
	MetricCommitLatency     = "relay.commit.duration"
	MetricAssignedPartitons = "relay.partitions.assigned"
	// MetricRecordOutcomes counts committed outcomes by outcome
	// (processed, retry, quarantined, rejected) and error code.
	MetricRecordOutcomes = "relay.records.outcome"
)

// Metrics implements txn.Observer with OpenTelemetry instruments.
type Metrics struct {
	Registry *prometheus.Registry
	provider *sdkmetric.MeterProvider

	consumed, committed, outputs, txns, aborted, outcomes metric.Int64Counter
	latency                                               metric.Float64Histogram
	assigned                                              atomic.Int64
	ready                                                 atomic.Bool
}

// New builds the instruments and a Prometheus registry that exports them.
func New() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, err
	}
	// Commit latency buckets: a commit is a few broker round trips, so
	// milliseconds to seconds.
	view := sdkmetric.NewView(
		sdkmetric.Instrument{Name: MetricCommitLatency},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
			Boundaries: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}},
	)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(view))
	m := &Metrics{Registry: reg, provider: mp}
	meter := mp.Meter("relay")
	counter := func(name, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = meter.Int64Counter(name, metric.WithDescription(desc))
		return c
	}
	m.consumed = counter(MetricRecordsConsumed, "source records handled into a transaction (aborted ones are handled again)")
	m.committed = counter(MetricRecordsCommitted, "source records whose offsets were committed")
	m.outputs = counter(MetricOutputsCommitted, "records written by committed transactions")
	m.txns = counter(MetricTxnCommitted, "committed transactions")
	m.aborted = counter(MetricTxnAborted, "aborted transactions, by reason")
	m.outcomes = counter(MetricRecordOutcomes, "records by committed outcome and error code")
	if err != nil {
		return nil, err
	}
	if m.latency, err = meter.Float64Histogram(MetricCommitLatency, metric.WithUnit("s"),
		metric.WithDescription("time to send offsets and commit a transaction")); err != nil {
		return nil, err
	}
	if _, err = meter.Int64ObservableGauge(MetricAssignedPartitons, metric.WithDescription("partitions owned by this instance"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(m.assigned.Load())
			return nil
		})); err != nil {
		return nil, err
	}
	return m, nil
}

// Close flushes and stops the meter provider.
func (m *Metrics) Close(ctx context.Context) error { return m.provider.Shutdown(ctx) }

// Ready implements txn.Observer.
func (m *Metrics) Ready(r bool) { m.ready.Store(r) }

// IsReady reports whether the loop is consuming.
func (m *Metrics) IsReady() bool { return m.ready.Load() }

// Assigned implements txn.Observer.
func (m *Metrics) Assigned(n int) { m.assigned.Store(int64(n)) }

// Consumed implements txn.Observer.
func (m *Metrics) Consumed(n int) { m.consumed.Add(context.Background(), int64(n)) }

// Committed implements txn.Observer.
func (m *Metrics) Committed(records, outputs int, latency time.Duration) {
	ctx := context.Background()
	m.txns.Add(ctx, 1)
	m.committed.Add(ctx, int64(records))
	m.outputs.Add(ctx, int64(outputs))
	m.latency.Record(ctx, latency.Seconds())
}

// Aborted implements txn.Observer.
func (m *Metrics) Aborted(why string) {
	m.aborted.Add(context.Background(), 1, metric.WithAttributes(attribute.String("reason", why)))
}

// Outcome implements pipeline.Outcomes: n records reached outcome with code
// ("" when processed) in a committed transaction.
func (m *Metrics) Outcome(outcome, code string, n int) {
	m.outcomes.Add(context.Background(), int64(n), metric.WithAttributes(
		attribute.String("outcome", outcome), attribute.String("code", code)))
}
