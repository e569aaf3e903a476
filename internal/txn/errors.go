package txn

import (
	"errors"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// kafkaError is how the loop reads librdkafka's error flags. kafka.Error
// implements it; tests implement it too, because kafka.NewError cannot set
// the retriable or abort flags.
type kafkaError interface {
	error
	Code() kafka.ErrorCode
	IsRetriable() bool
	TxnRequiresAbort() bool
	IsFatal() bool
}

// errKind is what the loop does about an error from a transactional call.
type errKind int

const (
	kindNone errKind = iota + 1
	// kindRetriable: the same call may be made again (librdkafka says so,
	// e.g. a timeout or a coordinator move).
	kindRetriable
	// kindAbort: the transaction cannot commit; abort it and reprocess
	// from the committed offsets.
	kindAbort
	// kindFatal: the producer is unusable, typically fenced by a newer
	// instance with the same transactional.id; relay must stop.
	kindFatal
	// kindUnknown: neither retriable, abortable nor fatal (e.g. a state
	// error). The transaction's outcome cannot be trusted: re-initialise
	// the producer and rewind.
	kindUnknown
)

// classify reads librdkafka's flags. Order matters: a fatal error may also
// say it requires abort, and fatal wins.
func classify(err error) errKind {
	if err == nil {
		return kindNone
	}
	var ke kafkaError
	if !errors.As(err, &ke) {
		return kindUnknown
	}
	switch {
	case ke.IsFatal():
		return kindFatal
	case ke.Code() == kafka.ErrFenced || ke.Code() == kafka.ErrProducerFenced:
		// Fencing is fatal even if a wrapper lost the flag (KIP-98).
		return kindFatal
	case ke.TxnRequiresAbort():
		return kindAbort
	case ke.IsRetriable():
		return kindRetriable
	default:
		return kindUnknown
	}
}

// ErrFatal wraps errors after which relay must stop: the caller exits
// non-zero.
var ErrFatal = errors.New("fatal transactional error")
