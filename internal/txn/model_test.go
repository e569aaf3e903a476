package txn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/retry"
)

// The model is a broker in miniature: partitions of records, a consumer
// position per partition (moved by Poll and Seek, as librdkafka's is), and
// committed offsets and outputs that change only when a transaction
// commits. A run with failures injected at every transactional call must
// end with every source record's output committed exactly once.

type model struct {
	rng       *rand.Rand
	topic     string
	size      int64 // records per partition
	parts     int32
	pos       map[int32]int64
	paused    map[int32]bool
	mu        sync.Mutex // committed is read by the test's watcher too
	committed map[int32]int64
	outputs   map[string]int // "p/off" → committed outputs
	rr        int32
	cb        kafka.RebalanceCb
	assigned  bool
	fail      float64 // chance of each injected failure
}

func (m *model) SubscribeTopics(_ []string, cb kafka.RebalanceCb) error { m.cb = cb; return nil }

func (m *model) Poll(int) kafka.Event {
	if !m.assigned {
		m.assigned = true
		ev := kafka.AssignedPartitions{}
		for p := range m.parts {
			ev.Partitions = append(ev.Partitions, kafka.TopicPartition{Topic: &m.topic, Partition: p})
		}
		_ = m.cb(nil, ev)
		return nil
	}
	for range m.parts {
		p := m.rr
		m.rr = (m.rr + 1) % m.parts
		if m.paused[p] || m.pos[p] >= m.size {
			continue
		}
		off := m.pos[p]
		m.pos[p]++
		return &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &m.topic, Partition: p, Offset: kafka.Offset(off)}}
	}
	return nil
}

func (m *model) Committed(parts []kafka.TopicPartition, _ int) ([]kafka.TopicPartition, error) {
	out := make([]kafka.TopicPartition, len(parts))
	for i, tp := range parts {
		out[i] = tp
		off, ok := m.committed[tp.Partition]
		out[i].Offset = kafka.OffsetInvalid
		if ok {
			out[i].Offset = kafka.Offset(off)
		}
	}
	return out, nil
}

func (m *model) Seek(tp kafka.TopicPartition, _ int) error {
	m.pos[tp.Partition] = int64(tp.Offset)
	return nil
}
func (m *model) GetConsumerGroupMetadata() (*kafka.ConsumerGroupMetadata, error) {
	return kafka.NewTestConsumerGroupMetadata("g")
}
func (m *model) AssignmentLost() bool                    { return false }
func (m *model) Assign([]kafka.TopicPartition) error     { return nil }
func (m *model) Close() error                            { return nil }
func (m *model) Pause(tps []kafka.TopicPartition) error  { return m.setPaused(tps, true) }
func (m *model) Resume(tps []kafka.TopicPartition) error { return m.setPaused(tps, false) }
func (m *model) setPaused(tps []kafka.TopicPartition, v bool) error {
	for _, tp := range tps {
		m.paused[tp.Partition] = v
	}
	return nil
}

func (m *model) done() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.parts {
		if m.committed[p] < m.size {
			return false
		}
	}
	return true
}

func (m *model) roll() bool { return m.rng.Float64() < m.fail }

// pick draws one of two failures, each with chance fail: 1, 2, or 0 for
// none.
func (m *model) pick() int {
	switch r := m.rng.Float64(); {
	case r < m.fail:
		return 1
	case r < 2*m.fail:
		return 2
	}
	return 0
}

// modelProducer writes into the model only when its transaction commits.
type modelProducer struct {
	m       *model
	events  chan kafka.Event
	inTxn   bool
	pending []string
	offsets []kafka.TopicPartition
	broken  bool // an earlier produce "failed to deliver": abortable
	// unreported are the records given since the last delivery report:
	// as librdkafka does, every record is reported once, and a
	// transaction's all before its commit or abort returns.
	unreported []kafka.TopicPartition
}

// report reports every unreported record, with code (0: delivered).
func (p *modelProducer) report(code kafka.ErrorCode) {
	for _, tp := range p.unreported {
		if code != 0 {
			tp.Error = kafka.NewError(code, code.String(), false)
		}
		p.events <- &kafka.Message{TopicPartition: tp}
	}
	p.unreported = nil
}

func (p *modelProducer) InitTransactions(context.Context) error { return nil }
func (p *modelProducer) BeginTransaction() error {
	if p.m.roll() {
		return errAbortable
	}
	p.inTxn, p.pending, p.offsets, p.broken = true, nil, nil, false
	return nil
}

func (p *modelProducer) Produce(msg *kafka.Message, _ chan kafka.Event) error {
	if p.broken {
		return fakeErr{code: kafka.ErrState}
	}
	switch p.m.pick() {
	case 1:
		return fakeErr{code: kafka.ErrUnknownPartition}
	case 2:
		// Accepted now, but its delivery fails: the transaction can
		// only abort, later produces answer _STATE, and the report
		// says which partition failed.
		// librdkafka purges what is queued and reports each purged
		// message, as a failure that is no partition's fault, before
		// the report of the one that failed.
		p.broken = true
		p.report(kafka.ErrPurgeQueue)
		tp := msg.TopicPartition
		tp.Error = kafka.NewError(kafka.ErrMsgSizeTooLarge, "too large", false)
		p.events <- &kafka.Message{TopicPartition: tp}
		return nil
	}
	p.pending = append(p.pending, string(msg.Value))
	p.unreported = append(p.unreported, msg.TopicPartition)
	return nil
}

func (p *modelProducer) Flush(int) int { return 0 }
func (p *modelProducer) SendOffsetsToTransaction(_ context.Context, offs []kafka.TopicPartition, _ *kafka.ConsumerGroupMetadata) error {
	p.offsets = offs
	return nil
}

func (p *modelProducer) CommitTransaction(context.Context) error {
	if p.broken {
		return errAbortable
	}
	p.report(0)
	switch p.m.pick() {
	case 1:
		return errAbortable
	case 2:
		// The commit lands, but the answer is lost: the loop must
		// re-initialise and find out from the committed offsets.
		p.apply()
		return errOdd
	}
	p.apply()
	return nil
}

func (p *modelProducer) apply() {
	for _, v := range p.pending {
		p.m.outputs[v]++
	}
	p.m.mu.Lock()
	for _, tp := range p.offsets {
		p.m.committed[tp.Partition] = int64(tp.Offset)
	}
	p.m.mu.Unlock()
	p.inTxn, p.pending = false, nil
}

func (p *modelProducer) AbortTransaction(context.Context) error {
	p.report(kafka.ErrPurgeQueue)
	p.inTxn, p.pending, p.broken = false, nil, false
	return nil
}
func (p *modelProducer) Purge(int) error          { return nil }
func (p *modelProducer) Events() chan kafka.Event { return p.events }
func (p *modelProducer) Close()                   { close(p.events) }
func (p *modelProducer) GetFatalError() error     { return nil }

// TestWholeRunExactlyOnceUnderInjectedFailures: every call that can fail —
// begin, handle, produce (synchronously, or through a failed delivery),
// commit (abortable, or with an unknown outcome) — fails now and then;
// at the end every record's output is committed exactly once and every
// partition's offset is at its end.
func TestWholeRunExactlyOnceUnderInjectedFailures(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			m := &model{
				rng: rand.New(rand.NewPCG(seed, 7)), topic: "src", size: 300, parts: 3,
				pos: map[int32]int64{}, paused: map[int32]bool{}, committed: map[int32]int64{},
				outputs: map[string]int{}, fail: 0.02,
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			handler := HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
				if m.done() {
					cancel()
				}
				if m.roll() {
					return nil, errors.New("cannot decide")
				}
				v := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
				return []Output{{Topic: "out", Partition: r.Partition, Value: []byte(v)}}, nil
			})
			factory := func() (Producer, error) { return &modelProducer{m: m, events: make(chan kafka.Event)}, nil }
			set := Settings{Topics: []string{"src"}, CommitInterval: time.Millisecond, MaxRecords: 7,
				OpTimeout: time.Second, ShutdownTimeout: time.Second, TxnTimeout: time.Minute}
			l := New(set, m, factory, handler, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
			l.backoff = retry.Schedule(time.Microsecond, time.Microsecond)
			l.reportWait = time.Millisecond
			stallBackoffForTest(t)
			go func() {
				for ctx.Err() == nil && !m.done() {
					time.Sleep(5 * time.Millisecond)
				}
				cancel()
			}()
			if err := l.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if !m.done() {
				t.Fatalf("run did not finish: committed %v", m.committed)
			}
			for p := range m.parts {
				for off := range m.size {
					if n := m.outputs[fmt.Sprintf("%d/%d", p, off)]; n != 1 {
						t.Fatalf("record %d/%d was output %d times, want exactly once", p, off, n)
					}
				}
			}
		})
	}
}

// stallBackoffForTest makes held partitions come back at once.
func stallBackoffForTest(t *testing.T) {
	old := stallBackoff
	stallBackoff = [2]time.Duration{time.Microsecond, time.Microsecond}
	t.Cleanup(func() { stallBackoff = old })
}
