package envelope

import "strconv"

// Headers on every processed output record.
const (
	// MessageID is the stable identity of a source record,
	// "topic/partition/offset". Downstream consumers deduplicate on it; it
	// is the same however often the record is delivered or replayed.
	MessageID = "relay.message.id"
	// TraceParent and TraceState carry W3C trace context across hops.
	TraceParent = "traceparent"
	TraceState  = "tracestate"
)

// ID formats the deterministic identity of a source record. The failure id of
// a record's first failure uses the same format, so duplicates are
// recognisable by equality.
func ID(topic string, partition int32, offset int64) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10) + "/" + strconv.FormatInt(offset, 10)
}
