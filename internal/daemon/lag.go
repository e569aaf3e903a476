package daemon

import (
	"sync"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/telemetry"
)

// lagReader reads the lag of the consumer's assigned partitions from what
// the consumer already knows — its positions and the high watermarks of
// its last fetches — without a request to the broker, so a scrape never
// waits on Kafka. It reads nothing once the consumer is closing: a scrape
// must not call into a destroyed client.
type lagReader struct {
	mu     sync.Mutex
	c      *kafka.Consumer
	closed bool
}

// lag is the telemetry.LagSource. A partition with no position or end yet
// is left out.
func (r *lagReader) lag() []telemetry.Lag {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	assigned, err := r.c.Assignment()
	if err != nil || len(assigned) == 0 {
		return nil
	}
	pos, err := r.c.Position(assigned)
	if err != nil {
		return nil
	}
	out := make([]telemetry.Lag, 0, len(pos))
	for _, tp := range pos {
		if tp.Topic == nil || tp.Offset < 0 {
			continue
		}
		if _, high, err := r.c.GetWatermarkOffsets(*tp.Topic, tp.Partition); err == nil && high >= 0 {
			out = append(out, telemetry.Lag{Topic: *tp.Topic, Partition: tp.Partition, Records: max(high-int64(tp.Offset), 0)})
		}
	}
	return out
}

// logStart is where a partition's log starts, as the consumer last heard
// it in a fetch response (no request to the broker).
func (r *lagReader) logStart(topic string, partition int32) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, false
	}
	low, _, err := r.c.GetWatermarkOffsets(topic, partition)
	return low, err == nil && low >= 0
}

// lagConsumer is the loop's consumer; closing it first stops the lag
// reader.
type lagConsumer struct {
	*kafka.Consumer
	r *lagReader
}

func (c lagConsumer) Close() error {
	c.r.mu.Lock()
	c.r.closed = true
	c.r.mu.Unlock()
	return c.Consumer.Close()
}

// swap makes c the consumer read, after the loop gave up the one before
// (refused its group.instance.id; left unclosed).
func (r *lagReader) swap(c *kafka.Consumer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.c, r.closed = c, false
}

// setSaslCredentials gives the consumer new SASL credentials, unless it is
// closing.
func (r *lagReader) setSaslCredentials(user, pass string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	return r.c.SetSaslCredentials(user, pass)
}

// guardedProducer is a loop producer that a secret rotation can reach
// only while it is open: the check and the call into librdkafka are one
// step with Close, which destroys the handle.
type guardedProducer struct {
	*kafka.Producer
	mu     sync.Mutex
	closed bool
}

// Close implements txn.Producer.
func (p *guardedProducer) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Producer.Close()
}

func (p *guardedProducer) setSaslCredentials(user, pass string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	return p.SetSaslCredentials(user, pass)
}
