package telemetry

import (
	"strings"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
)

// Kind is how Prometheus types a metric.
type Kind string

// Kinds of metrics.
const (
	Counter   Kind = "counter"
	Gauge     Kind = "gauge"
	Histogram Kind = "histogram"
)

// Metric describes one instrument. New builds each with its Help, which
// /metrics shows; docs/REFERENCE.md lists them all from Instruments.
type Metric struct {
	Name   string // the OpenTelemetry name
	Kind   Kind
	Unit   string // "s" for seconds; "" for a count
	Labels []string
	Help   string
	// Note adds, for the reference only, what an operator does with it.
	Note string
}

// Instruments lists every metric relay exports, in the reference's order.
var Instruments = []Metric{
	{Name: MetricRecordsConsumed, Kind: Counter, Help: "source records read and handled into a transaction (aborted ones are read again; a parked record counts once)"},
	{Name: MetricRecordsCommitted, Kind: Counter, Help: "source records whose offsets were committed"},
	{Name: MetricOutputsCommitted, Kind: Counter, Help: "records written by committed transactions"},
	{Name: MetricTxnCommitted, Kind: Counter, Help: "committed transactions"},
	{Name: MetricTxnAborted, Kind: Counter, Labels: []string{"reason"}, Help: "aborted transactions, by reason"},
	{Name: MetricCommitLatency, Kind: Histogram, Unit: "s", Help: "time to send offsets and commit a transaction"},
	{Name: MetricAssignedPartitions, Kind: Gauge, Help: "partitions owned by this instance"},
	{Name: MetricConsumerLag, Kind: Gauge, Labels: []string{"topic", "partition"}, Help: "records of an assigned partition not consumed yet (its last fetched end minus relay's position)",
		Note: "Sources and tiers: a tier partition's lag is its retry backlog."},
	{Name: MetricKeyParked, Kind: Gauge, Help: "followers of blocked keys parked in memory (key ordering): in flight, their source offsets not committed yet",
		Note: "Bounded by RELAY_KEY_PARK_MAX_RECORDS. Each is handled at its key's turn; a restart or a new owner reads it again from its source."},
	{Name: MetricKeyParkedBytes, Kind: Gauge, Help: "bytes of the parked followers in memory (keys, values, headers and their bookkeeping)",
		Note: "Bounded by RELAY_KEY_PARK_MAX_BYTES."},
	{Name: MetricKeyParkedBehind, Kind: Gauge, Labels: []string{"topic", "partition"}, Help: "offsets a source partition's committed offset stays behind relay's handled position because of parked records (at its last commit)",
		Note: "A lag tool that reads committed offsets (kafka-consumer-groups, Burrow) counts these as lag: they are handled (settled or parked), not stuck. Subtract them, or alert on `relay_consumer_lag`, which counts from relay's position."},
	{Name: MetricKeyParkRefused, Kind: Counter, Labels: []string{"reason"}, Help: "followers copied into their head's tier instead of parked, by the limit that stopped them: records, bytes, wait, metadata, group",
		Note: "Rising `records` or `bytes`: the limits are too low for the incident (each copy is a tier record); `wait`: heads wait in tiers longer than RELAY_KEY_PARK_MAX_WAIT; `group`: a member of the group does not park (relay_group_features)."},
	{Name: MetricKeyParkLost, Kind: Counter, Help: "parked followers found gone from their source partition when it was read again (retention, DeleteRecords, or the group's offset reset past them), never handled: their keys went on without them",
		Note: "Any increase is a record relay could not deliver: `relay audit` reports it as unverifiable (deleted from the source). Keep the source's retention well above RELAY_KEY_PARK_MAX_AGE plus the longest outage."},
	{Name: MetricGroupFeatures, Kind: Gauge, Labels: []string{"feature"}, Help: "1 when every member of the group announces the feature (in force), 0 when one does not, as this instance last saw the group",
		Note: "`park`: key ordering parks followers only while it is 1. It turns 1 by itself once the last member without it (a relay before 0.7.0, one with RELAY_KEY_PARK_MAX_RECORDS=0) has left."},
	{Name: MetricStalledPartitions, Kind: Gauge, Help: "source partitions held back because their records cannot be written; nothing is skipped",
		Note: "Alert when above 0."},
	{Name: MetricRecordOutcomes, Kind: Counter, Labels: []string{"outcome", "code"}, Help: "records by committed outcome and error code",
		Note: "Counted when their transaction commits, never twice. Present from the start at 0 for every outcome with `code=\"\"`. At most 100 distinct codes are labels of their own; later ones count as `other` (a hook's rejection codes are the hook's). The quarantine rate by code is `rate(relay_records_outcome_total{outcome=\"quarantined\"}[5m])`."},
	{Name: MetricEndedAttempts, Kind: Histogram, Labels: []string{"outcome"}, Help: "attempts of records that were retried (in place or from a tier), when they reach an end state, by outcome"},
	{Name: MetricEndedDuration, Kind: Histogram, Unit: "s", Labels: []string{"outcome"}, Help: "time from a record's first failure to its end state (in place and in tiers), by outcome"},
	{Name: MetricReplayOutcomes, Kind: Counter, Labels: []string{"outcome"}, Help: "replayed records by ledger outcome: resolved, failed-again, duplicate",
		Note: "`duplicate`: a copy of a settled failure, or a replay whose failure was discarded."},
	{Name: MetricUnresolved, Kind: Gauge, Labels: []string{"code"}, Help: "quarantined failures not resolved or discarded (open, replaying, failed-again), by error code",
		Note: "Covers the source partitions the instance owns: sum it across instances."},
	{Name: MetricOldestAge, Kind: Gauge, Unit: "s", Labels: []string{"code"}, Help: "age of the oldest unresolved quarantined failure, since it was first quarantined, by error code",
		Note: "Covers the source partitions the instance owns: take the `max` across instances."},
	{Name: MetricHeadroom, Kind: Gauge, Unit: "s", Labels: []string{"topic"}, Help: "time until retention may delete the oldest unresolved record of a quarantine topic; negative: past it",
		Note: "Record timestamp + `retention.ms` − now, for the source partitions the instance owns: take the `min` across instances."},
	{Name: MetricTopicUnresolved, Kind: Gauge, Labels: []string{"topic", "owner"}, Help: "unresolved quarantined failures of a quarantine topic, labelled with its owner (RELAY_QUARANTINE_OWNER)",
		Note: "Covers the source partitions the instance owns: sum it across instances. The alert `RelayQuarantineOverThreshold` compares it with `relay_quarantine_alert_threshold` and carries `owner`, for Alertmanager to route on."},
	{Name: MetricAlertThreshold, Kind: Gauge, Labels: []string{"topic", "owner"}, Help: "the alert threshold of a quarantine topic (RELAY_QUARANTINE_ALERT_THRESHOLD); absent when none is set"},
	{Name: MetricHookDuration, Kind: Histogram, Unit: "s", Labels: []string{"outcome"}, Help: "time from sending a request to the hook to its whole answer (one per record, or per batch under RELAY_HOOK_BATCH), by outcome: ok, rejected, invalid, rate_limited, refused, unavailable, timeout, error, unexpected",
		Note: "p99: `histogram_quantile(0.99, sum by (le) (rate(relay_hook_request_duration_seconds_bucket[5m])))`. `timeout` lands at RELAY_HOOK_TIMEOUT."},
	{Name: MetricHookInFlight, Kind: Gauge, Help: "requests to the hook waiting for their answer",
		Note: "At most RELAY_HOOK_CONCURRENCY (per record) or the batches in flight."},
	{Name: MetricHookTimeouts, Kind: Counter, Help: "hook calls that got no answer within RELAY_HOOK_TIMEOUT",
		Note: "A replay watching relay's metrics (RELAY_REPLAY_WATCH_METRICS) stops when these rise by more than `--max-hook-timeouts` during it."},
	{Name: MetricWedges, Kind: Counter, Labels: []string{"call"}, Help: "librdkafka calls that did not return within their bound, by call; each cost a new producer and a rewind",
		Note: "librdkafka does not always keep a call's timeout (confluentinc/librdkafka#5456, #5511, seen after a broker restart): relay abandons the producer and goes on with a new one. A `consumer …` call stops relay instead (exit 1). More than 3 within 10 minutes stop relay too."},
	{Name: MetricWedgedOpen, Kind: Gauge, Help: "abandoned producers still open: their wedged call has not returned",
		Note: "Each holds its threads and buffers; relay stops when more than 3 are open at once."},
	{Name: MetricSpansDropped, Kind: Counter, Help: "spans relay made and did not export: a full export queue, or a collector that did not take them",
		Note: "Tracing never slows the loop: with the collector away, spans are dropped and counted here."},
	{Name: MetricPointsDropped, Kind: Counter, Help: "metric data points of OTLP exports the collector did not take",
		Note: "Only with an OTLP metric endpoint set; a partial success counts only the points the collector rejected. With the default cumulative temporality the next export that succeeds carries the totals on."},
	{Name: MetricCredentialRefused, Kind: Gauge, Labels: []string{"dependency"}, Help: "1 while a dependency (schema_registry, hook) refuses relay's credential with 401 or 403",
		Note: "No record is at fault: records wait within their retry budget (codes `SCHEMA_REGISTRY_UNAUTHORIZED`, `HOOK_UNAUTHORIZED`) and `/readyz` answers 503 until the credential is fixed. Alert when above 0."},
	{Name: MetricKafkaBrokerRTT, Kind: Gauge, Unit: "s", Labels: []string{"client", "broker", "stat"}, Help: "round-trip time of requests to a broker over the last statistics interval (stat avg or p99), for the loop's consumer or producer",
		Note: "From librdkafka's statistics of the loop's consumer and producer (no other client gets statistics.interval.ms), every RELAY_KAFKA_STATISTICS_INTERVAL_MS (15 s by default; 0 turns these relay_kafka_* gauges off). A broker spoken to by neither client in the interval is absent."},
	{Name: MetricKafkaBrokerRequests, Kind: Gauge, Labels: []string{"client", "broker", "queue"}, Help: "requests to a broker waiting to be sent (queue waiting) and sent without an answer yet (queue in_flight)",
		Note: "Requests that keep waiting while the round-trip time is low point at the client (CPU, a wedged call), not the broker."},
	{Name: MetricKafkaProducerQueue, Kind: Gauge, Help: "records in the loop producer's queue, produced and not yet acknowledged",
		Note: "Bounded by RELAY_KAFKA_QUEUE_BUFFERING_MAX_MESSAGES; near it, produces wait for room."},
	{Name: MetricKafkaProducerBytes, Kind: Gauge, Help: "bytes of the records in the loop producer's queue",
		Note: "Bounded by RELAY_KAFKA_QUEUE_BUFFERING_MAX_KBYTES."},
	{Name: MetricKafkaTxnState, Kind: Gauge, Labels: []string{"state"}, Help: "1 for the loop producer's transaction state in librdkafka (Ready, InTransaction, BeginCommit, AbortableError, FatalError, …)",
		Note: "`AbortableError` or `FatalError` that stays across intervals is what `relay_transactions_aborted_total` and the logs explain."},
	{Name: MetricKafkaFetchState, Kind: Gauge, Labels: []string{"fetch_state"}, Help: "partitions the loop's consumer fetches, by librdkafka's fetch state (active, stopped, offset-query, offset-wait, …)",
		Note: "Partitions that stay out of `active` while others fetch are paused (key order, a stall) or waiting for their position."},
	{Name: MetricKafkaGroupState, Kind: Gauge, Labels: []string{"state", "join_state"}, Help: "1 for the loop consumer's group state and join state in librdkafka (up and steady when it is a settled member)",
		Note: "A join state other than `steady` for long is a rebalance that does not finish."},
	{Name: MetricBuildInfo, Kind: Gauge, Labels: []string{"version", "commit", "go_version", "librdkafka_version"}, Help: "1, labelled with relay's build"},
	// The OpenTelemetry semantic conventions' messaging metrics, under
	// their names and descriptions (messaging.go).
	{Name: messagingconv.ClientConsumedMessages{}.Name(), Kind: Counter, Labels: []string{"messaging_system", "messaging_operation_name", "messaging_consumer_group_name"},
		Help: messagingconv.ClientConsumedMessages{}.Description(),
		Note: "The semantic conventions' name for `relay_records_consumed_total` (operation `poll`): what generic Kafka dashboards read."},
	{Name: messagingconv.ClientSentMessages{}.Name(), Kind: Counter, Labels: []string{"messaging_system", "messaging_operation_name"},
		Help: messagingconv.ClientSentMessages{}.Description(),
		Note: "The semantic conventions' name for `relay_outputs_committed_total` (operation `send`): records written by committed transactions."},
	{Name: messagingconv.ProcessDuration{}.Name(), Kind: Histogram, Unit: "s", Labels: []string{"messaging_system", "messaging_operation_name", "messaging_consumer_group_name", "error_type"},
		Help: messagingconv.ProcessDuration{}.Description(),
		Note: "The hook's processing of a record (of a batch under `RELAY_HOOK_BATCH`), operation `process`; `error_type` is the hook's outcome when it was not ok. Absent without a hook."},
}

// PrometheusName is the metric's name on /metrics: OpenTelemetry's name
// with '_' for '.', the unit's suffix, and _total for a counter.
func (m Metric) PrometheusName() string {
	name := strings.ReplaceAll(m.Name, ".", "_")
	if m.Unit == "s" {
		name += "_seconds"
	}
	if m.Kind == Counter {
		name += "_total"
	}
	return name
}

// describe is the description option of the instrument name, from
// Instruments.
func describe(name string) metric.InstrumentOption {
	for _, m := range Instruments {
		if m.Name == name {
			return metric.WithDescription(m.Help)
		}
	}
	return metric.WithDescription("")
}
