package txn

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// BenchmarkLoop measures what the loop adds per record around its
// handler: a source record with a header polled, handed to a handler that
// passes it on with one more header, its output produced, its offset
// tracked, and a commit every 1,000 records. The consumer and producer
// cost nothing, so what remains is relay's own.
func BenchmarkLoop(b *testing.B) {
	c := &benchConsumer{fakeConsumer: fakeConsumer{topic: "src"}, n: b.N}
	c.msg.TopicPartition = kafka.TopicPartition{Topic: &c.topic, Partition: 3}
	c.msg.Key, c.msg.Value = []byte("key"), []byte("value")
	c.msg.Headers = []kafka.Header{{Key: "h", Value: []byte("v")}}
	id := []byte("src/3/7")
	h := HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
		hs := append(make([]Header, 0, len(r.Headers)+1), r.Headers...)
		return []Output{{Topic: "out", Partition: r.Partition, Key: r.Key, Value: r.Value,
			Headers: append(hs, Header{Key: "relay.message.id", Value: id}), Timestamp: r.Timestamp}}, nil
	})
	set := Settings{Topics: []string{"src"}, CommitInterval: time.Hour, MaxRecords: 1000,
		OpTimeout: time.Second, ShutdownTimeout: time.Second}
	p := &benchProducer{fakeProducer: newFakeProducer()}
	factory := func() (Producer, error) { return p, nil }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.onIdle = cancel
	l := New(set, c, factory, h, log, nil)
	b.ReportAllocs()
	b.ResetTimer()
	if err := l.Run(ctx); err != nil {
		b.Fatal(err)
	}
	if p.n != b.N {
		b.Fatalf("produced %d of %d", p.n, b.N)
	}
}

// benchConsumer assigns partition 3, then gives n records of it, one
// message reused with the next offset each time.
type benchConsumer struct {
	fakeConsumer
	msg      kafka.Message
	n, polls int
}

func (c *benchConsumer) Poll(int) kafka.Event {
	switch {
	case c.polls == 0:
		c.polls++
		_ = c.cb(nil, c.assign(3))
		return nil
	case c.polls > c.n:
		c.onIdle()
		return nil
	}
	c.msg.TopicPartition.Offset = kafka.Offset(c.polls - 1)
	c.polls++
	return &c.msg
}

// benchProducer counts the records it is given instead of keeping them.
type benchProducer struct {
	*fakeProducer
	n int
}

func (p *benchProducer) Produce(*kafka.Message, chan kafka.Event) error {
	p.n++
	return nil
}
