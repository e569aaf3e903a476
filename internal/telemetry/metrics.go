package telemetry

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"relay/internal/ledger"
)

// Metric names, as Prometheus shows them (OTel adds the _total suffix to
// counters and the unit suffix to histograms).
const (
	MetricRecordsConsumed    = "relay.records.consumed"
	MetricRecordsCommitted   = "relay.records.committed"
	MetricOutputsCommitted   = "relay.outputs.committed"
	MetricTxnCommitted       = "relay.transactions.committed"
	MetricTxnAborted         = "relay.transactions.aborted"
	MetricCommitLatency      = "relay.commit.duration"
	MetricAssignedPartitions = "relay.partitions.assigned"
	// MetricStalledPartitions counts the source partitions held back
	// because their records cannot be written (a missing output partition
	// or topic, a record too large): relay retries them and skips nothing.
	MetricStalledPartitions = "relay.partitions.stalled"
	// MetricRecordOutcomes counts committed outcomes by outcome
	// (processed, retry, quarantined, rejected) and error code.
	MetricRecordOutcomes = "relay.records.outcome"
	// MetricEndedAttempts and MetricEndedDuration describe records that
	// failed at least once when they reach an end state (processed,
	// quarantined, rejected): attempts made, and time since the first
	// failure — the time spent in place and in the tiers.
	MetricEndedAttempts = "relay.retry.attempts"
	MetricEndedDuration = "relay.retry.duration"
	// MetricReplayOutcomes counts replayed records by ledger outcome:
	// resolved, failed-again, duplicate.
	MetricReplayOutcomes = "relay.replay.outcome"
	// Quarantine ledger gauges, for the partitions this instance owns.
	MetricUnresolved = "relay.quarantine.unresolved"
	MetricOldestAge  = "relay.quarantine.oldest.age"
	MetricHeadroom   = "relay.quarantine.retention.headroom"
	// MetricTopicUnresolved and MetricAlertThreshold carry the owner of
	// each quarantine topic, so that alerts route to it.
	MetricTopicUnresolved = "relay.quarantine.topic.unresolved"
	MetricAlertThreshold  = "relay.quarantine.alert.threshold"
	// MetricHookTimeouts counts hook calls that got no answer in time.
	MetricHookTimeouts = "relay.hook.timeouts"
	// MetricBuildInfo is 1, labelled with relay's version and commit and
	// the Go and librdkafka versions.
	MetricBuildInfo = "relay.build.info"
)

// QuarantineSource gives the ledger summary the quarantine gauges show.
type QuarantineSource func() ledger.Summary

// Metrics implements txn.Observer with OpenTelemetry instruments.
type Metrics struct {
	Registry *prometheus.Registry
	provider *sdkmetric.MeterProvider

	committed, outputs, txns, aborted, outcomes, replays metric.Int64Counter
	wedges                                               metric.Int64Counter
	wedgedOpen                                           atomic.Int64
	latency, endedDuration                               metric.Float64Histogram
	endedAttempts                                        metric.Int64Histogram
	assigned, stalled                                    atomic.Int64
	consumed                                             atomic.Int64 // relay.records.consumed, read when collected
	alive, liveBound                                     atomic.Int64 // unix nanoseconds; a duration
	ready                                                atomic.Bool
	quarantine                                           atomic.Pointer[QuarantineSource]
	owners                                               atomic.Pointer[[]Ownership]
	hookTimeouts                                         metric.Int64Counter
	hook                                                 hookMeters
	messaging                                            messagingMeters
	kstats                                               kafkaStats
	lag                                                  atomic.Pointer[LagSource]
	parked                                               atomic.Pointer[ParkedSource]
	features                                             atomic.Pointer[FeaturesSource]
	spansDropped                                         atomic.Pointer[func() int64]
	pointsDropped                                        atomic.Int64
	codes                                                *codeLabels
	refused                                              refusals
	now                                                  func() time.Time
}

// New builds the instruments and a Prometheus registry that exports them,
// and, when the standard OTEL_EXPORTER_OTLP_* variables name an endpoint,
// an OTLP/HTTP exporter too.
func New(environ []string) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, err
	}
	m := &Metrics{Registry: reg, now: time.Now, codes: newCodeLabels(maxCodeLabels)}
	opts := []sdkmetric.Option{sdkmetric.WithReader(exp), sdkmetric.WithView(views()...)}
	otlp, err := otlpReader(environ, &m.pointsDropped)
	if err != nil {
		return nil, err
	}
	if otlp != nil {
		opts = append(opts, sdkmetric.WithReader(otlp))
	}
	m.provider = sdkmetric.NewMeterProvider(opts...)
	if err := m.instruments(m.provider.Meter("relay")); err != nil {
		return nil, err
	}
	// The Go runtime and the process, as every Go service exports them.
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	m.zero()
	return m, nil
}

// views set the histograms' buckets.
func views() []sdkmetric.View {
	// Commit latency buckets: a commit is a few broker round trips, so
	// milliseconds to seconds.
	latency := sdkmetric.NewView(
		sdkmetric.Instrument{Name: MetricCommitLatency},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
			Boundaries: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}},
	)
	attemptsView := sdkmetric.NewView(
		sdkmetric.Instrument{Name: MetricEndedAttempts},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: []float64{1, 2, 3, 4, 5, 7, 10, 15, 20, 50}}},
	)
	durationView := sdkmetric.NewView(
		sdkmetric.Instrument{Name: MetricEndedDuration},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
			Boundaries: []float64{.1, .5, 1, 5, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600},
		}},
	)
	return []sdkmetric.View{latency, attemptsView, durationView, hookView(), processView()}
}

// instruments creates relay's counters, histograms and gauges.
func (m *Metrics) instruments(meter metric.Meter) error {
	var err error
	counter := func(name string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = meter.Int64Counter(name, describe(name))
		return c
	}
	m.committed = counter(MetricRecordsCommitted)
	m.outputs = counter(MetricOutputsCommitted)
	m.txns = counter(MetricTxnCommitted)
	m.aborted = counter(MetricTxnAborted)
	m.outcomes = counter(MetricRecordOutcomes)
	m.replays = counter(MetricReplayOutcomes)
	m.hookTimeouts = counter(MetricHookTimeouts)
	if err != nil {
		return err
	}
	if m.endedAttempts, err = meter.Int64Histogram(MetricEndedAttempts,
		describe(MetricEndedAttempts)); err != nil {
		return err
	}
	if m.endedDuration, err = meter.Float64Histogram(MetricEndedDuration, metric.WithUnit("s"),
		describe(MetricEndedDuration)); err != nil {
		return err
	}
	if m.latency, err = meter.Float64Histogram(MetricCommitLatency, metric.WithUnit("s"),
		describe(MetricCommitLatency)); err != nil {
		return err
	}
	if err := m.messagingInstruments(meter); err != nil {
		return err
	}
	return m.gauges(meter)
}

// gauges registers the observable instruments: the gauges, and the
// records-consumed counter, which Consumed keeps in an atomic number.
func (m *Metrics) gauges(meter metric.Meter) error {
	var err error
	if err = buildInfo(meter); err != nil {
		return err
	}
	if err = m.lagGauge(meter); err != nil {
		return err
	}
	if err = m.parkedGauges(meter); err != nil {
		return err
	}
	if err = m.featuresGauge(meter); err != nil {
		return err
	}
	if err = m.droppedCounters(meter); err != nil {
		return err
	}
	if err = m.quarantineGauges(meter); err != nil {
		return err
	}
	if err = m.wedgeInstruments(meter); err != nil {
		return err
	}
	if err = m.hookInstruments(meter); err != nil {
		return err
	}
	if err = m.kafkaStatsGauges(meter); err != nil {
		return err
	}
	if err = m.refusedGauge(meter); err != nil {
		return err
	}
	if _, err = meter.Int64ObservableCounter(MetricRecordsConsumed, describe(MetricRecordsConsumed),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(m.consumed.Load())
			return nil
		})); err != nil {
		return err
	}
	if _, err = meter.Int64ObservableGauge(MetricStalledPartitions,
		describe(MetricStalledPartitions),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(m.stalled.Load())
			return nil
		})); err != nil {
		return err
	}
	if _, err = meter.Int64ObservableGauge(MetricAssignedPartitions, describe(MetricAssignedPartitions),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(m.assigned.Load())
			return nil
		})); err != nil {
		return err
	}
	return nil
}

// quarantineGauges registers the ledger gauges; they observe nothing until
// SetQuarantine gives them a source.
func (m *Metrics) quarantineGauges(meter metric.Meter) error {
	unresolved, err := meter.Int64ObservableGauge(MetricUnresolved,
		describe(MetricUnresolved))
	if err != nil {
		return err
	}
	oldest, err := meter.Float64ObservableGauge(MetricOldestAge, metric.WithUnit("s"),
		describe(MetricOldestAge))
	if err != nil {
		return err
	}
	headroom, err := meter.Float64ObservableGauge(MetricHeadroom, metric.WithUnit("s"),
		describe(MetricHeadroom))
	if err != nil {
		return err
	}
	byTopic, err := meter.Int64ObservableGauge(MetricTopicUnresolved, describe(MetricTopicUnresolved))
	if err != nil {
		return err
	}
	threshold, err := meter.Int64ObservableGauge(MetricAlertThreshold, describe(MetricAlertThreshold))
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		src := m.quarantine.Load()
		if src == nil {
			return nil
		}
		sum := (*src)()
		now := m.now()
		if owners := m.owners.Load(); owners != nil {
			for _, ow := range *owners {
				attrs := metric.WithAttributes(attribute.String("topic", ow.Topic), attribute.String("owner", ow.Owner))
				o.ObserveInt64(byTopic, int64(sum.ByTopic[ow.Topic]), attrs)
				if ow.Threshold > 0 {
					o.ObserveInt64(threshold, int64(ow.Threshold), attrs)
				}
			}
		}
		for _, c := range sum.ByCode {
			code := metric.WithAttributes(attribute.String("code", m.codes.label(c.Code)))
			o.ObserveInt64(unresolved, int64(c.Unresolved), code)
			o.ObserveFloat64(oldest, now.Sub(c.Oldest).Seconds(), code)
		}
		for topic, d := range sum.Deadline {
			o.ObserveFloat64(headroom, d.Sub(now).Seconds(), metric.WithAttributes(attribute.String("topic", topic)))
		}
		return nil
	}, unresolved, oldest, headroom, byTopic, threshold)
	return err
}

// Ownership is who owns a quarantine topic, and its alert threshold (0:
// none).
type Ownership struct {
	Topic, Owner string
	Threshold    int
}

// SetOwners names the quarantine topics' owners for the gauges that carry
// them.
func (m *Metrics) SetOwners(owners []Ownership) { m.owners.Store(&owners) }

// HookTimedOut counts a hook call that got no answer in time.
func (m *Metrics) HookTimedOut() { m.hookTimeouts.Add(context.Background(), 1) }

// SetQuarantine gives the quarantine gauges their source.
func (m *Metrics) SetQuarantine(src QuarantineSource) { m.quarantine.Store(&src) }

// Ended implements pipeline.Outcomes.
func (m *Metrics) Ended(outcome ledger.Outcome, attempts int, elapsed time.Duration) {
	o := metric.WithAttributes(attribute.String("outcome", string(outcome)))
	m.endedAttempts.Record(context.Background(), int64(attempts), o)
	m.endedDuration.Record(context.Background(), elapsed.Seconds(), o)
}

// Replayed implements pipeline.Outcomes.
func (m *Metrics) Replayed(outcome string, n int) {
	m.replays.Add(context.Background(), int64(n), metric.WithAttributes(attribute.String("outcome", outcome)))
}

// Close flushes and stops the meter provider.
func (m *Metrics) Close(ctx context.Context) error { return m.provider.Shutdown(ctx) }

// Ready implements txn.Observer.
func (m *Metrics) Ready(r bool) { m.ready.Store(r) }

// IsReady reports whether the loop is consuming.
func (m *Metrics) IsReady() bool { return m.ready.Load() }

// Assigned implements txn.Observer.
func (m *Metrics) Assigned(n int) { m.assigned.Store(int64(n)) }

// Stalled implements txn.Observer.
func (m *Metrics) Stalled(n int) { m.stalled.Store(int64(n)) }

// Consumed implements txn.Observer. The loop calls it for every record,
// so it only adds to a number, which the counter reads when collected.
func (m *Metrics) Consumed(n int) { m.consumed.Add(int64(n)) }

// Committed implements txn.Observer.
func (m *Metrics) Committed(records, outputs int, latency time.Duration) {
	ctx := context.Background()
	m.txns.Add(ctx, 1)
	m.committed.Add(ctx, int64(records))
	m.outputs.Add(ctx, int64(outputs))
	m.sentMessages(ctx, outputs)
	m.latency.Record(ctx, latency.Seconds())
}

// Aborted implements txn.Observer.
func (m *Metrics) Aborted(why string) {
	m.aborted.Add(context.Background(), 1, metric.WithAttributes(attribute.String("reason", why)))
}

// Outcome implements pipeline.Outcomes: n records reached outcome with code
// ("" when processed) in a committed transaction.
func (m *Metrics) Outcome(outcome ledger.Outcome, code string, n int) {
	m.outcomes.Add(context.Background(), int64(n), metric.WithAttributes(
		attribute.String("outcome", string(outcome)), attribute.String("code", m.codes.label(code))))
}
