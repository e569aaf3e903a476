package statetopic

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaclient"
	"relay/internal/kafkaerr"
	"relay/internal/ledger"
)

// Writer writes ledger changes (and replay records) in transactions of its
// own transactional id: one per group and command, so a second copy of the
// command fences the first instead of interleaving with it.
type Writer struct {
	p       *kafka.Producer
	timeout time.Duration
}

// NewWriter initialises a transactional producer with transactionalID.
func NewWriter(ctx context.Context, cfg *config.Config, transactionalID string) (*Writer, error) {
	p, err := kafkaclient.Writer(cfg, transactionalID)
	if err != nil {
		return nil, err
	}
	w := &Writer{p: p, timeout: max(cfg.OpTimeout, 10*time.Second)}
	c, cancel := context.WithTimeout(ctx, 2*w.timeout)
	defer cancel()
	if err := p.InitTransactions(c); err != nil {
		p.Close()
		return nil, fmt.Errorf("init transactions (%s): %w", transactionalID, err)
	}
	return w, nil
}

// Write writes msgs in one transaction; on any error the transaction is
// aborted and nothing of it is visible.
func (w *Writer) Write(ctx context.Context, msgs []*kafka.Message) error {
	if err := w.p.BeginTransaction(); err != nil {
		return err
	}
	for _, m := range msgs {
		for {
			err := w.p.Produce(m, nil)
			if err == nil {
				break
			}
			if kafkaerr.Is(err, kafka.ErrQueueFull) {
				w.p.Flush(100)
				continue
			}
			w.abort()
			return err
		}
	}
	c, cancel := context.WithTimeout(ctx, 2*w.timeout)
	defer cancel()
	if err := w.p.CommitTransaction(c); err != nil {
		w.abort()
		return err
	}
	return nil
}

func (w *Writer) abort() {
	c, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	_ = w.p.AbortTransaction(c)
}

// Close closes the producer.
func (w *Writer) Close() { w.p.Close() }

// EventMessage is the state-topic record of a ledger change.
func EventMessage(topic string, e *ledger.Event) *kafka.Message {
	return &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: e.Partition()},
		Key:            []byte(e.Key()), Value: e.Value(),
	}
}
