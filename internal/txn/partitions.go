package txn

import (
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// tpKey identifies a partition. kafka.TopicPartition cannot be a map key:
// its Topic is a pointer, different for every message.
type tpKey struct {
	topic     string
	partition int32
}

func keyOf(tp kafka.TopicPartition) tpKey {
	return tpKey{topic: topicOf(tp), partition: tp.Partition}
}

func (k tpKey) at(off int64) kafka.TopicPartition {
	t := k.topic
	return kafka.TopicPartition{Topic: &t, Partition: k.partition, Offset: kafka.Offset(off)}
}

func (k tpKey) String() string { return fmt.Sprintf("%s[%d]", k.topic, k.partition) }

func topicOf(tp kafka.TopicPartition) string {
	if tp.Topic == nil {
		return ""
	}
	return *tp.Topic
}

// toRecord is m as the handler sees it. The record shares m's headers:
// the loop does not use m's after.
func toRecord(m *kafka.Message) *Record {
	r := &Record{
		Topic:     topicOf(m.TopicPartition),
		Partition: m.TopicPartition.Partition,
		Offset:    int64(m.TopicPartition.Offset),
		Key:       m.Key,
		Value:     m.Value,
		Timestamp: m.Timestamp,
	}
	if len(m.Headers) > 0 {
		r.Headers = m.Headers
	}
	return r
}

func describe(parts []kafka.TopicPartition) []string {
	out := make([]string, len(parts))
	for i, tp := range parts {
		out[i] = keyOf(tp).String()
	}
	return out
}

// numbers lists the distinct partition numbers of parts.
func numbers(parts []kafka.TopicPartition) []int32 {
	seen := map[int32]bool{}
	var out []int32
	for _, tp := range parts {
		if !seen[tp.Partition] {
			seen[tp.Partition] = true
			out = append(out, tp.Partition)
		}
	}
	return out
}
