package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Header is a record header. It is the client's own type, so that the
// headers of a record and of an output go between relay and the client as
// they are, without a copy per record.
type Header = kafka.Header

// Record is one consumed source record, as the Handler sees it.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time
}

// Output is one record the Handler wants written in the same transaction as
// its source offset.
type Output struct {
	Topic string
	// Partition is the partition to write to; AnyPartition lets the
	// producer's partitioner choose by key.
	Partition int32
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time
}

// AnyPartition lets the producer's partitioner choose the partition.
const AnyPartition int32 = -1

// Handler decides what a source record becomes. It is the seam the failure
// state machine plugs into.
//
// A nil error with outputs means: write these outputs and commit the source
// offset with them. A non-nil error means relay cannot decide the record's
// next state now: the transaction is aborted, the record stays in its source
// and is handled again after a rewind. A Handler must be deterministic enough
// that handling a record twice (after an abort) is harmless: nothing it does
// outside the returned outputs is covered by the transaction.
type Handler interface {
	Handle(ctx context.Context, rec *Record) ([]Output, error)
}

// NotDueError is what a Handler returns for a record that must not be
// handled before Until (a retry-tier record whose relay.not.before lies
// ahead). The loop pauses the record's partition and seeks back to the
// record, so it is fetched again when due; nothing of that partition from
// the record on is committed meanwhile, and the poll loop never sleeps.
type NotDueError struct{ Until time.Time }

func (e *NotDueError) Error() string {
	return fmt.Sprintf("not due before %s", e.Until.UTC().Format(time.RFC3339Nano))
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, rec *Record) ([]Output, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, rec *Record) ([]Output, error) { return f(ctx, rec) }

// PartitionListener is implemented by a Handler that keeps per-partition
// state (e.g. the blocked keys of key ordering). OnAssigned runs inside the
// rebalance callback, before any record of the partitions is handled; an
// error stops relay. OnRevoked runs after the open transaction has ended.
// Partitions are given as numbers: a source partition and its tier
// partitions share one.
type PartitionListener interface {
	OnAssigned(ctx context.Context, partitions []int32) error
	OnRevoked(partitions []int32)
}

// StateReloader is implemented by a PartitionListener that can read its
// durable state of partitions it keeps again without forgetting what it
// holds only in memory (e.g. partition ordering's waits, which an abort
// must not reset): after a commit whose outcome was unknown the loop calls
// Reload instead of OnRevoked and OnAssigned.
type StateReloader interface {
	Reload(ctx context.Context, partitions []int32) error
}

// OwnershipListener is implemented by a Handler that wants the exact
// topic-partitions the member owns (PartitionListener gives numbers only):
// the loop calls it after every assignment change, from the loop's
// goroutine, with the whole current set.
type OwnershipListener interface {
	OnOwned(owned []TopicPartition)
}

// TopicPartition is one owned partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// TxnListener is implemented by a Handler that keeps per-transaction state
// (e.g. outcome counts): the loop tells it how each transaction ended.
type TxnListener interface {
	OnCommit()
	OnAbort()
}

// Floors is implemented by a Handler that keeps some of the records it
// is handed aside, neither written nor settled (key ordering's parked
// records): their partition then commits below records it has handled,
// and the commit's metadata says which of those are settled, so that the
// partition's next reader skips them.
type Floors interface {
	// Floor is what partition tp commits when every record below next
	// has been handled: an offset, and the metadata that goes with it.
	// The offset may be above next when the handler knows the records in
	// between to be settled.
	Floor(tp TopicPartition, next int64) (offset int64, metadata string)
	// Resume gives the offset a partition is about to be read again
	// from, with the metadata committed with it ("" if none): after it
	// is assigned, and after a rewind. A negative offset is a partition
	// assigned with nothing committed, read from where the consumer's
	// reset policy says. An error (metadata that cannot be read) stops
	// relay.
	Resume(tp TopicPartition, offset int64, metadata string) error
	// Due are records kept aside whose turn has come: the loop hands
	// each to Handle again, as it would a record just read (its offset
	// is below the partition's next; it changes no offset but the
	// floor).
	Due() []*Record
}

// MetadataRefuser is implemented by a Floors handler that can commit less
// metadata: the loop calls MetadataRefused when the brokers refused a
// commit's offset metadata as too large (OFFSET_METADATA_TOO_LARGE),
// before it aborts. Unless the handler commits less from then on, every
// commit of the partition is refused again.
type MetadataRefuser interface {
	MetadataRefused()
}
