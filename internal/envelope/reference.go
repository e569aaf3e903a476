package envelope

// HeaderDoc is one row of the header tables in docs/REFERENCE.md: headers
// that go together, and what they carry.
type HeaderDoc struct {
	Names   []string
	Meaning string
}

// OutputHeaders are the headers relay sets on every output record.
var OutputHeaders = []HeaderDoc{
	{[]string{MessageID}, "`topic/partition/offset` of the source record: the stable identity downstream consumers deduplicate on, the same when the record succeeds from a tier"},
	{[]string{SourceFingerprint}, "16 hex digits: the first 8 bytes of SHA-256 over the source record's key length (uvarint), key and value, the same on every hop; `relay audit` credits a record to a source offset only when it matches the record there"},
	{[]string{ReplayID, ReplayCount}, "only on the output of a replayed record: which replay, and how many times the failure was replayed"},
}

// KeptHeaders says what becomes of a record's own headers on every hop.
const KeptHeaders = "all source headers are kept as they are (`" + TraceParent + "`/`" + TraceState +
	"` too, unless relay traces: then they are its span's); relay's own `" + Prefix + "*` headers from earlier hops are removed"

// FailureHeaders are the failure envelope: the headers relay adds to every
// retry-tier, quarantine and rejected record.
var FailureHeaders = []HeaderDoc{
	{[]string{FailureID}, "`topic/partition/offset` of the record's first appearance; the same on every hop"},
	{[]string{SourceTopic, SourcePartition, SourceOffset, SourceTimestamp}, "where it came from"},
	{[]string{SourceFingerprint}, "the source record's fingerprint, as on outputs"},
	{[]string{ConsumerGroup}, "the group that failed it"},
	{[]string{Attempt}, "attempts made so far"},
	{[]string{FirstFailedAt, LastFailedAt}, "RFC 3339 UTC, milliseconds"},
	{[]string{NotBefore}, "tiers only: when the next attempt is due"},
	{[]string{ErrorClass, ErrorCode}, "class and code (see the failure codes and classes)"},
	{[]string{ErrorMessage}, "the cause, on one line, at most `RELAY_ERROR_MESSAGE_MAX` bytes, redacted"},
	{[]string{SchemaID, SchemaSubject, SchemaVersion}, "the writer schema, as far as known"},
	{[]string{ReplayID, ReplayCount}, "kept from a replayed record"},
	{[]string{KeySeq}, "key ordering, tiers only: the record's place in its key's queue; records of a blocked key are processed in this order"},
	{[]string{KeyHead}, "key ordering, tiers only: the failure id of the earlier record of its key that this one waits behind. On a `KEY_BLOCKED` record, `relay.first.failed.at` is when it began to wait behind that one: relay audit reports it stuck past a head's whole life (the retry budget and the longest tier) plus `--stuck-after`"},
	{[]string{RecordTimestamp}, "tiers only: the record's own timestamp (the source's; the replay's for a replayed record), which it keeps when it leaves the tiers"},
	{[]string{TraceParent, TraceState}, "with tracing on, the context of the record's process span (see docs/TRACING.md); else carried from the record"},
}
