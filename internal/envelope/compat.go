package envelope

import (
	"encoding/binary"
	"strconv"
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
		h = append(h,
			Header{connectPrefix + "topic", []byte(f.SourceTopic)},
			Header{connectPrefix + "partition", []byte(strconv.Itoa(int(f.SourcePartition)))},
			Header{connectPrefix + "offset", []byte(strconv.FormatInt(f.SourceOffset, 10))},
			Header{connectPrefix + "connector.name", []byte(f.ConsumerGroup)},
			Header{connectPrefix + "stage", []byte("TRANSFORMATION")},
			Header{connectPrefix + "exception.class.name", []byte("relay." + f.Code)},
			Header{connectPrefix + "exception.message", []byte(f.Message)},
		)
	}
	return h
}
