package kafkaerr

import (
	"fmt"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

type flags struct {
	code                    kafka.ErrorCode
	retriable, abort, fatal bool
}

func (e flags) Error() string          { return e.code.String() }
func (e flags) Code() kafka.ErrorCode  { return e.code }
func (e flags) IsRetriable() bool      { return e.retriable }
func (e flags) TxnRequiresAbort() bool { return e.abort }
func (e flags) IsFatal() bool          { return e.fatal }

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Kind
	}{
		{nil, None},
		{fmt.Errorf("plain"), Unknown},
		{flags{code: kafka.ErrTimedOut, retriable: true}, Retriable},
		{flags{code: kafka.ErrInvalidTxnState, abort: true}, Abort},
		{flags{code: kafka.ErrFenced, abort: true, fatal: true}, Fatal},
		{fmt.Errorf("wrapped: %w", flags{code: kafka.ErrProducerFenced}), Fatal},
		{flags{code: kafka.ErrState}, Unknown},
	}
	for _, c := range cases {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestCodeAndPredicates(t *testing.T) {
	lost := fmt.Errorf("fetch: %w", kafka.NewError(kafka.ErrUnknownTopicOrPart, "no topic", false))
	if Code(lost) != kafka.ErrUnknownTopicOrPart || !Missing(lost) || !Permanent(lost) || Transient(lost) {
		t.Errorf("unknown topic read wrong: code %v missing %v permanent %v transient %v", Code(lost), Missing(lost), Permanent(lost), Transient(lost))
	}
	busy := kafka.NewError(kafka.ErrCoordinatorLoadInProgress, "loading", false)
	if !Transient(busy) || Permanent(busy) || PartitionFault(busy) {
		t.Errorf("loading coordinator read wrong")
	}
	if !PartitionFault(kafka.NewError(kafka.ErrMsgSizeTooLarge, "big", false)) || PartitionFault(kafka.NewError(kafka.ErrPurgeQueue, "purged", false)) {
		t.Errorf("partition faults read wrong")
	}
	if Code(fmt.Errorf("plain")) != kafka.ErrUnknown || IsKafka(fmt.Errorf("plain")) || !IsKafka(busy) {
		t.Errorf("non-Kafka errors read wrong")
	}
	if !Permanent(flags{code: kafka.ErrState, fatal: true}) {
		t.Errorf("a fatal error must be permanent")
	}
}
