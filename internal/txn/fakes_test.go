package txn

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// fakeErr carries librdkafka's flags, which kafka.NewError cannot set.
type fakeErr struct {
	code                     kafka.ErrorCode
	retriable, abort, fatalF bool
}

func (e fakeErr) Error() string          { return "fake: " + e.code.String() }
func (e fakeErr) Code() kafka.ErrorCode  { return e.code }
func (e fakeErr) IsRetriable() bool      { return e.retriable }
func (e fakeErr) TxnRequiresAbort() bool { return e.abort }
func (e fakeErr) IsFatal() bool          { return e.fatalF }

var (
	errRetriable = fakeErr{code: kafka.ErrTimedOut, retriable: true}
	errAbortable = fakeErr{code: kafka.ErrInvalidTxnState, abort: true}
	errFenced    = fakeErr{code: kafka.ErrFenced, fatalF: true}
	errOdd       = fakeErr{code: kafka.ErrState}
)

// sleepEvent in a script makes that Poll take so long and return nothing.
type sleepEvent time.Duration

func (e sleepEvent) String() string { return "sleep " + time.Duration(e).String() }

// lostEvent in a script makes the consumer report its assignment lost
// (the session expired), until the next assignment.
type lostEvent struct{}

func (lostEvent) String() string { return "assignment lost" }

// fakeConsumer plays a script of events; when the script is done it calls
// onIdle (which usually cancels the test's context).
type fakeConsumer struct {
	topic     string
	script    []kafka.Event
	onIdle    func()
	cb        kafka.RebalanceCb
	committed map[int32]kafka.Offset // partition → committed offset
	metadata  map[int32]string       // partition → its committed offset's metadata
	// partErrs: the next Committed calls answer these partitions with
	// an error and offset -1001, as librdkafka does per partition.
	partErrs    []int32
	partErrCode kafka.ErrorCode // default: coordinator loading
	seeks       []kafka.TopicPartition
	lost        bool
	closed      bool
	pauses      []int32
	resumes     []int32
	// afterRevoke runs when the rebalance callback has returned from a
	// revoke, i.e. when librdkafka would hand the partitions over.
	afterRevoke func()
}

func (c *fakeConsumer) SubscribeTopics(_ []string, cb kafka.RebalanceCb) error {
	c.cb = cb
	return nil
}

func (c *fakeConsumer) Poll(int) kafka.Event {
	if len(c.script) == 0 {
		if c.onIdle != nil {
			c.onIdle()
		}
		return nil
	}
	ev := c.script[0]
	c.script = c.script[1:]
	// Rebalance events go to the callback, as librdkafka does inside Poll.
	switch e := ev.(type) {
	case sleepEvent:
		time.Sleep(time.Duration(e))
		return nil
	case lostEvent:
		c.lost = true
		return nil
	case kafka.AssignedPartitions:
		c.lost = false // librdkafka clears it with a new assignment
		_ = c.cb(nil, ev)
		return nil
	case kafka.RevokedPartitions:
		_ = c.cb(nil, ev)
		if c.afterRevoke != nil {
			c.afterRevoke()
		}
		return nil
	}
	return ev
}

func (c *fakeConsumer) Committed(parts []kafka.TopicPartition, _ int) ([]kafka.TopicPartition, error) {
	out := make([]kafka.TopicPartition, len(parts))
	for i, tp := range parts {
		off, ok := c.committed[tp.Partition]
		if !ok {
			off = kafka.OffsetInvalid
		}
		out[i] = kafka.TopicPartition{Topic: tp.Topic, Partition: tp.Partition, Offset: off}
		if md, ok := c.metadata[tp.Partition]; ok {
			out[i].Metadata = &md
		}
		if len(c.partErrs) > 0 && c.partErrs[0] == tp.Partition {
			c.partErrs = c.partErrs[1:]
			out[i].Offset = kafka.OffsetInvalid
			code := c.partErrCode
			if code == 0 {
				code = kafka.ErrCoordinatorLoadInProgress
			}
			out[i].Error = kafka.NewError(code, "partition error", false)
		}
	}
	return out, nil
}

func (c *fakeConsumer) Seek(tp kafka.TopicPartition, _ int) error {
	c.seeks = append(c.seeks, tp)
	return nil
}

func (c *fakeConsumer) GetConsumerGroupMetadata() (*kafka.ConsumerGroupMetadata, error) {
	return kafka.NewTestConsumerGroupMetadata("g")
}

func (c *fakeConsumer) AssignmentLost() bool { return c.lost }

func (c *fakeConsumer) Assign(parts []kafka.TopicPartition) error { return nil }

func (c *fakeConsumer) Pause(parts []kafka.TopicPartition) error {
	for _, tp := range parts {
		c.pauses = append(c.pauses, tp.Partition)
	}
	return nil
}

func (c *fakeConsumer) Resume(parts []kafka.TopicPartition) error {
	for _, tp := range parts {
		c.resumes = append(c.resumes, tp.Partition)
	}
	return nil
}
func (c *fakeConsumer) Close() error { c.closed = true; return nil }

func (c *fakeConsumer) msg(partition int32, offset int64) *kafka.Message {
	return &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &c.topic, Partition: partition, Offset: kafka.Offset(offset)},
		Value:          []byte("v"),
	}
}

func (c *fakeConsumer) assign(partitions ...int32) kafka.AssignedPartitions {
	ev := kafka.AssignedPartitions{}
	for _, p := range partitions {
		ev.Partitions = append(ev.Partitions, kafka.TopicPartition{Topic: &c.topic, Partition: p})
	}
	return ev
}

func (c *fakeConsumer) revoke(partitions ...int32) kafka.RevokedPartitions {
	return kafka.RevokedPartitions{Partitions: c.assign(partitions...).Partitions}
}

// fakeProducer records calls; each errs queue gives the result of the next
// call of its method (nil when empty).
type fakeProducer struct {
	mu                              sync.Mutex
	calls                           []string
	produced                        []*kafka.Message
	sentOffsets                     [][]kafka.TopicPartition
	initErrs, commitErrs, abortErrs []error
	firstFatal                      error // GetFatalError's answer
	sendErrs, beginErrs             []error
	// produceErrs gives the result of the next Produce calls.
	produceErrs                []error
	events                     chan kafka.Event
	inTxn                      bool
	committedTxns, abortedTxns int
	closed                     bool
	// wedge makes the call it names ("init", "begin", "send", "commit",
	// "abort", "flush") block until the channel is closed, as librdkafka
	// calls that ignore their timeout do; onInit runs at InitTransactions.
	wedge  map[string]chan struct{}
	onInit func()
	// fenced: a newer producer with the same transactional id has
	// initialised, so the broker refuses this one's calls.
	fenced atomic.Bool
}

// block waits while the call is wedged.
func (p *fakeProducer) block(name string) {
	p.mu.Lock()
	ch := p.wedge[name]
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func newFakeProducer() *fakeProducer { return &fakeProducer{events: make(chan kafka.Event)} }

func pop(q *[]error) error {
	if len(*q) == 0 {
		return nil
	}
	err := (*q)[0]
	*q = (*q)[1:]
	return err
}

func (p *fakeProducer) call(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, name)
}

func (p *fakeProducer) InitTransactions(context.Context) error {
	p.call("init")
	if p.onInit != nil {
		p.onInit()
	}
	p.block("init")
	return pop(&p.initErrs)
}

func (p *fakeProducer) BeginTransaction() error {
	p.call("begin")
	p.block("begin")
	if err := pop(&p.beginErrs); err != nil {
		return err
	}
	if p.inTxn {
		return errors.New("begin inside a transaction")
	}
	p.inTxn = true
	return nil
}

func (p *fakeProducer) Produce(m *kafka.Message, _ chan kafka.Event) error {
	if !p.inTxn {
		return errors.New("produce outside a transaction")
	}
	if err := pop(&p.produceErrs); err != nil {
		return err
	}
	p.produced = append(p.produced, m)
	return nil
}

func (p *fakeProducer) Flush(int) int { p.call("flush"); p.block("flush"); return 0 }

func (p *fakeProducer) SendOffsetsToTransaction(_ context.Context, offs []kafka.TopicPartition, _ *kafka.ConsumerGroupMetadata) error {
	p.call("send")
	p.block("send")
	if p.fenced.Load() {
		return errFenced
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := pop(&p.sendErrs); err != nil {
		return err
	}
	p.sentOffsets = append(p.sentOffsets, offs)
	return nil
}

func (p *fakeProducer) CommitTransaction(context.Context) error {
	p.call("commit")
	p.block("commit")
	if p.fenced.Load() {
		return errFenced
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := pop(&p.commitErrs); err != nil {
		return err
	}
	p.inTxn = false
	p.committedTxns++
	return nil
}

func (p *fakeProducer) AbortTransaction(context.Context) error {
	p.call("abort")
	p.block("abort")
	if err := pop(&p.abortErrs); err != nil {
		return err
	}
	p.inTxn = false
	p.abortedTxns++
	return nil
}

func (p *fakeProducer) Purge(int) error          { return nil }
func (p *fakeProducer) GetFatalError() error     { return p.firstFatal }
func (p *fakeProducer) Events() chan kafka.Event { return p.events }

func (p *fakeProducer) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		close(p.events)
	}
}
