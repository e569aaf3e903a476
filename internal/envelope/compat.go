package envelope

import (
	"encoding/binary"
	"strconv"
	"strings"
)

// Compatibility headers for tools that already read Spring Kafka's
// dead-letter headers or Kafka Connect's error context. Off by default;
// RELAY_COMPAT_HEADERS turns them on.
const (
	springPrefix  = "kafka_dlt-"
	connectPrefix = "__connect.errors."
)

// Compat selects the compatibility header sets.
type Compat struct {
	Spring  bool
	Connect bool
}

// Headers returns the compatibility headers for f. Spring writes partition
// and offset as big-endian binary numbers; Connect writes strings.
func (c Compat) Headers(f *Failure) []Header {
	var h []Header
	if c.Spring {
		part := binary.BigEndian.AppendUint32(nil, uint32(f.SourcePartition))
		off := binary.BigEndian.AppendUint64(nil, uint64(f.SourceOffset))
		ts := binary.BigEndian.AppendUint64(nil, uint64(f.SourceTimestamp.UnixMilli()))
		h = append(h,
			Header{springPrefix + "original-topic", []byte(f.SourceTopic)},
			Header{springPrefix + "original-partition", part},
			Header{springPrefix + "original-offset", off},
			Header{springPrefix + "original-timestamp", ts},
			Header{springPrefix + "original-consumer-group", []byte(f.ConsumerGroup)},
			Header{springPrefix + "exception-fqcn", []byte("relay." + f.Code)},
			Header{springPrefix + "exception-message", []byte(f.Message)},
		)
	}
	if c.Connect {
		// The whole set Kafka Connect's dead-letter reporter writes, so
		// tools that parse a Connect DLQ read these: numbers as decimal
		// strings, the stage as one of Connect's stage names, class
		// names as Java-like names. relay has no task numbers: 0.
		h = append(h,
			Header{connectPrefix + "topic", []byte(f.SourceTopic)},
			Header{connectPrefix + "partition", []byte(strconv.Itoa(int(f.SourcePartition)))},
			Header{connectPrefix + "offset", []byte(strconv.FormatInt(f.SourceOffset, 10))},
			Header{connectPrefix + "connector.name", []byte(f.ConsumerGroup)},
			Header{connectPrefix + "task.id", []byte("0")},
			Header{connectPrefix + "stage", []byte("TRANSFORMATION")},
			Header{connectPrefix + "class.name", []byte(stepOf(f.Code))},
			Header{connectPrefix + "exception.class.name", []byte("relay." + f.Code)},
			Header{connectPrefix + "exception.message", []byte(f.Message)},
			Header{connectPrefix + "exception.stacktrace", []byte(stackTrace(f))},
		)
	}
	return h
}

// stepOf names, for Connect's class.name header (the class that was
// executing), the step of relay a failure code comes from.
func stepOf(code string) string {
	switch {
	case strings.HasPrefix(code, "SCHEMA_"), strings.HasPrefix(code, "WIRE_FORMAT"),
		strings.HasPrefix(code, "PAYLOAD_"), strings.HasPrefix(code, "FIELD_"):
		return "relay.SchemaAdmission"
	case strings.HasPrefix(code, "REJECTED_"):
		return "relay.Rules"
	case strings.HasPrefix(code, "HOOK_"):
		return "relay.Hook"
	}
	return "relay.Pipeline"
}

// stackTrace is the failure's cause chain in the shape of a Java stack
// trace without frames (relay records none): the failure, then a
// "Caused by:" line for each cause, every message redacted.
func stackTrace(f *Failure) string {
	var b strings.Builder
	b.WriteString("relay." + f.Code + ": " + f.Message)
	for _, c := range f.Causes {
		b.WriteString("\nCaused by: " + c)
	}
	return b.String()
}
