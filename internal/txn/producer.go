package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaerr"
	"relay/internal/retry"
)

func (l *Loop) startProducer(ctx context.Context) error {
	p, err := l.newProducer()
	if err != nil {
		return fmt.Errorf("%w: create producer: %w", ErrFatal, err)
	}
	l.drain.Add(1)
	go l.drainEvents(p.Events())
	// After a crash or during a broker outage the coordinator may be
	// unavailable or still completing the previous epoch: wait for it, as
	// long as the error is not fatal. Nothing is consumed meanwhile.
	err = l.persist(ctx, "init transactions", func() error {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.set.OpTimeout)
		defer cancel()
		return p.InitTransactions(c)
	})
	if err != nil {
		_ = p.Purge(kafka.PurgeQueue | kafka.PurgeInFlight | kafka.PurgeNonBlocking)
		p.Close()
		l.drain.Wait()
		return err
	}
	l.producer = p
	return nil
}

// persist makes a call again, with backoff, until it succeeds, fails
// fatally, or ctx ends. It is for calls relay cannot go on without and that
// a broker outage makes fail for as long as the outage lasts.
func (l *Loop) persist(ctx context.Context, op string, call func() error) error {
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := call()
		switch {
		case err == nil:
			return struct{}{}, nil
		case errors.Is(err, ErrFatal):
			return struct{}{}, backoff.Permanent(err)
		case kafkaerr.Classify(err) == kafkaerr.Fatal:
			return struct{}{}, backoff.Permanent(fmt.Errorf("%w: %s: %w", ErrFatal, op, err))
		}
		return struct{}{}, err
	},
		backoff.WithBackOff(retry.Schedule(100*time.Millisecond, 5*time.Second)),
		backoff.WithMaxElapsedTime(0), // for as long as the outage lasts
		backoff.WithNotify(func(err error, in time.Duration) {
			l.obs.Alive() // waiting out an outage is not being stuck
			l.log.Warn("kafka call failed; retrying", "op", op, "err", err, "in", in.String())
		}))
	if err != nil && !errors.Is(err, ErrFatal) && ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	return err
}

// drainEvents logs client errors (and failed deliveries, should reports be
// on). It ends when the producer is closed.
func (l *Loop) drainEvents(ch chan kafka.Event) {
	defer l.drain.Done()
	for ev := range ch {
		switch e := ev.(type) {
		case *kafka.Message:
			select { // room in the queue for a produce waiting on it
			case l.room <- struct{}{}:
			default:
			}
			// Good deliveries come too (the Go client reports all or
			// none); only failures matter, and of those only the first
			// of each partition is worth a log line: when a transaction
			// turns abortable every queued record fails with it.
			if e.TopicPartition.Error != nil && l.deliveries.add(e.TopicPartition) {
				l.log.Error("delivery failed; the transaction will abort", "topic", topicOf(e.TopicPartition), "partition", e.TopicPartition.Partition, "err", e.TopicPartition.Error)
			}
		case kafka.Error:
			l.log.Warn("producer error", "err", e, "code", e.Code().String(), "fatal", e.IsFatal())
		}
	}
}

func (l *Loop) closeProducer() {
	if l.producer == nil {
		return
	}
	// Purge so Close does not wait for messages of a transaction that is
	// being given up anyway.
	_ = l.producer.Purge(kafka.PurgeQueue | kafka.PurgeInFlight | kafka.PurgeNonBlocking)
	l.producer.Close()
	l.drain.Wait()
	l.producer = nil
}

// close ends both clients; the consumer first, so the group hears of our
// leaving while the producer's last transaction is already settled.
func (l *Loop) close() error {
	err := l.consumer.Close()
	l.closeProducer()
	if err != nil {
		return fmt.Errorf("close consumer: %w", err)
	}
	return nil
}

// produce enqueues one output. A full local queue is waited out, within
// OpTimeout of finding it full, by trying again at each delivery report: each frees room. Past
// OpTimeout the error is returned and the caller aborts the transaction,
// as for any failed produce; the record stays in its source.
func (l *Loop) produce(o *Output) error {
	msg := &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &o.Topic, Partition: o.Partition},
		Key:            o.Key,
		Value:          o.Value,
		Timestamp:      o.Timestamp,
	}
	if o.Partition == AnyPartition {
		msg.TopicPartition.Partition = kafka.PartitionAny
	}
	if len(o.Headers) > 0 {
		// The client copies them (and key and value) before it returns.
		msg.Headers = o.Headers
	}
	// The deadline starts at the first full queue: a produce that goes
	// through at once, nearly every one, reads no clock.
	var deadline time.Time
	for {
		err := l.producer.Produce(msg, nil)
		if err == nil || !kafkaerr.Is(err, kafka.ErrQueueFull) {
			return err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(l.set.OpTimeout)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		l.waitRoom(min(left, roomPoll))
	}
}

// roomPoll bounds one wait for room in a full producer queue. librdkafka
// frees a delivered message only after the Go client has handed its report
// over, so the report's signal can come a little early; the next try is
// then at most this much later.
const roomPoll = time.Millisecond

// waitRoom waits for the next delivery report (see drainEvents), or for d.
// It does not flush: the queue is full, so librdkafka is already sending
// whole batches, and a flush would hold the loop until the timeout even
// when room came at once.
func (l *Loop) waitRoom(d time.Duration) {
	if l.roomTimer == nil {
		l.roomTimer = time.NewTimer(d)
	} else {
		l.roomTimer.Reset(d)
	}
	select {
	case <-l.room:
	case <-l.roomTimer.C:
	}
	l.roomTimer.Stop()
}

// retry makes a transactional call, each attempt with its own deadline,
// again while librdkafka says the error is retriable.
func (l *Loop) retry(ctx context.Context, call func(context.Context) error) error {
	var err error
	for range opAttempts {
		l.obs.Alive() // each try is a stretch of its own for the liveness bound
		// A call in flight is not cut short by shutdown: a commit that
		// is about to succeed should. Each call has its own deadline.
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.set.OpTimeout)
		err = call(c)
		cancel()
		if kafkaerr.Classify(err) != kafkaerr.Retriable || ctx.Err() != nil {
			return err
		}
	}
	return err
}
