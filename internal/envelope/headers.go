package envelope

import "strconv"

// Headers on every processed output record.
const (
	// MessageID is the stable identity of a source record,
	// "topic/partition/offset". Downstream consumers deduplicate on it; it
	// is the same however often the record is delivered, retried or
	// replayed.
	MessageID = "relay.message.id"
	// SourceFingerprint is a short hash of the source record's key and
	// value bytes (see Fingerprint), on outputs and envelopes alike: relay
	// audit credits a record to a source offset only when it matches the
	// record there.
	SourceFingerprint = "relay.source.fingerprint"
	// TraceParent and TraceState carry W3C trace context across hops.
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// Headers of the failure envelope, on every retry-tier,
// quarantine and rejected record, next to the record's original headers.
const (
	FailureID       = "relay.failure.id"
	SourceTopic     = "relay.source.topic"
	SourcePartition = "relay.source.partition"
	SourceOffset    = "relay.source.offset"
	SourceTimestamp = "relay.source.timestamp"
	ConsumerGroup   = "relay.consumer.group"
	Attempt         = "relay.attempt"
	FirstFailedAt   = "relay.first.failed.at"
	LastFailedAt    = "relay.last.failed.at"
	NotBefore       = "relay.not.before"
	ErrorClass      = "relay.error.class"
	ErrorCode       = "relay.error.code"
	ErrorMessage    = "relay.error.message"
	SchemaID        = "relay.schema.id"
	SchemaSubject   = "relay.schema.subject"
	SchemaVersion   = "relay.schema.version"
	ReplayID        = "relay.replay.id"
	ReplayCount     = "relay.replay.count"
	// KeySeq is the place of a tier record in its key's queue (key
	// ordering): records of a blocked key are processed in this order.
	KeySeq = "relay.key.seq"
	// KeyHead is, on a tier record that waits behind an earlier record of
	// its key, that record's failure id; on a KEY_BLOCKED one,
	// relay.first.failed.at is when it began to wait behind it.
	KeyHead = "relay.key.head"
	// RecordTimestamp is, on tier records, the timestamp the record keeps
	// when it leaves the tiers; the tier record's own is the hop's time.
	RecordTimestamp = "relay.record.timestamp"
)

// Prefix starts every header relay owns. Headers with it are relay's and are
// rewritten at each hop; all others are the record's own and are kept.
const Prefix = "relay."

// ID formats the deterministic identity of a source record. The failure id of
// a record's first failure uses the same format, so duplicates are
// recognisable by equality.
func ID(topic string, partition int32, offset int64) string {
	// Built in a buffer on the stack, so that the string is the one
	// allocation (formatted numbers each took one of their own).
	var buf [128]byte
	b := append(buf[:0], topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, offset, 10)
	return string(b)
}
