package txn

import (
	"context"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Consumer is the part of *kafka.Consumer the loop uses.
type Consumer interface {
	SubscribeTopics(topics []string, cb kafka.RebalanceCb) error
	Poll(timeoutMs int) kafka.Event
	Committed(partitions []kafka.TopicPartition, timeoutMs int) ([]kafka.TopicPartition, error)
	Seek(partition kafka.TopicPartition, ignoredTimeoutMs int) error
	GetConsumerGroupMetadata() (*kafka.ConsumerGroupMetadata, error)
	AssignmentLost() bool
	Assign(partitions []kafka.TopicPartition) error
	Pause(partitions []kafka.TopicPartition) error
	Resume(partitions []kafka.TopicPartition) error
	Close() error
}

// Producer is the part of *kafka.Producer the loop uses.
type Producer interface {
	InitTransactions(ctx context.Context) error
	BeginTransaction() error
	Produce(msg *kafka.Message, deliveryChan chan kafka.Event) error
	Flush(timeoutMs int) int
	SendOffsetsToTransaction(ctx context.Context, offsets []kafka.TopicPartition, cgm *kafka.ConsumerGroupMetadata) error
	CommitTransaction(ctx context.Context) error
	AbortTransaction(ctx context.Context) error
	Purge(flags int) error
	Events() chan kafka.Event
	// GetFatalError is the producer's first fatal error (librdkafka
	// keeps it; a transactional call reports the latest).
	GetFatalError() error
	Close()
}

// ProducerFactory makes a new transactional producer with the instance's
// transactional.id. The loop calls it at start and again whenever the outcome
// of a transaction is unknown: a fresh InitTransactions makes the
// coordinator finish or abort what the old producer left open, and fences
// the old epoch.
type ProducerFactory func() (Producer, error)
