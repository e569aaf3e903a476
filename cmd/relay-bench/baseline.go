package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// baseline is mode (a): an in-process, non-transactional consume→produce
// passthrough. The consumer auto-commits; the producer is plain (librdkafka
// defaults, acks=all, no idempotence) with linger.ms=5 and no delivery
// reports. Records keep partition, key, value, headers and timestamp.
type baseline struct {
	b         *bench
	t         topics
	c         *kafka.Consumer
	p         *kafka.Producer
	forwarded atomic.Int64
	failure   atomic.Value // error
	stop      chan struct{}
	wg        sync.WaitGroup
	flushed   bool
	once      sync.Once
}

// baselineStarter starts the in-process passthrough; with idempotent, its
// producer is idempotent (at most 5 requests in flight, as relay's
// transactional producer), which separates the cost of idempotence from the
// cost of transactions.
func (b *bench) baselineStarter(idempotent bool) func(context.Context, topics) (passthrough, error) {
	return func(ctx context.Context, t topics) (passthrough, error) { return b.startBaseline(ctx, t, idempotent) }
}

func (b *bench) startBaseline(_ context.Context, t topics, idempotent bool) (passthrough, error) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": b.o.bootstrap, "group.id": t.group,
		"enable.auto.commit": true, "auto.offset.reset": "earliest",
	})
	if err != nil {
		return nil, err
	}
	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers": b.o.bootstrap, "linger.ms": 5, "go.delivery.reports": false,
		"enable.idempotence": idempotent,
	})
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	if err := c.Subscribe(t.src, nil); err != nil {
		_ = c.Close()
		p.Close()
		return nil, err
	}
	x := &baseline{b: b, t: t, c: c, p: p, stop: make(chan struct{})}
	x.wg.Add(2)
	go x.loop()
	go x.drain()
	return x, nil
}

func (x *baseline) fail(err error) { x.failure.CompareAndSwap(nil, err) }

func (x *baseline) loop() {
	defer x.wg.Done()
	out := x.t.out
	for {
		select {
		case <-x.stop:
			return
		default:
		}
		switch e := x.c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				x.fail(fmt.Errorf("consume: %w", e.TopicPartition.Error))
				continue
			}
			m := &kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: &out, Partition: e.TopicPartition.Partition},
				Key:            e.Key, Value: e.Value, Headers: e.Headers, Timestamp: e.Timestamp,
			}
			for {
				err := x.p.Produce(m, nil)
				var ke kafka.Error
				if err == nil {
					break
				}
				if !errors.As(err, &ke) || ke.Code() != kafka.ErrQueueFull {
					x.fail(fmt.Errorf("produce: %w", err))
					break
				}
				x.p.Flush(10)
			}
			x.forwarded.Add(1)
		case kafka.Error:
			if e.IsFatal() {
				x.fail(fmt.Errorf("consumer: %w", e))
			}
		}
	}
}

// drain watches the producer's events: without delivery reports only
// client errors arrive.
func (x *baseline) drain() {
	defer x.wg.Done()
	for {
		select {
		case <-x.stop:
			return
		case ev := <-x.p.Events():
			if e, ok := ev.(kafka.Error); ok && e.IsFatal() {
				x.fail(fmt.Errorf("producer: %w", e))
			}
		}
	}
}

func (x *baseline) check() error {
	if err, _ := x.failure.Load().(error); err != nil {
		return err
	}
	return nil
}

// caughtUp: every record forwarded, the producer flushed, and the output's
// high watermarks sum to the backlog.
func (x *baseline) caughtUp(ctx context.Context) (bool, error) {
	if x.forwarded.Load() < int64(x.b.o.records) {
		return false, nil
	}
	if !x.flushed {
		for x.p.Flush(100) > 0 {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
		}
		x.flushed = true
	}
	wm, err := x.b.watermarks(x.t.out)
	if err != nil {
		return false, err
	}
	return sum(wm) >= int64(x.b.o.records), nil
}

func (x *baseline) finish(context.Context, *result) error {
	err := x.check()
	x.kill()
	return err
}

func (x *baseline) kill() {
	x.once.Do(func() {
		close(x.stop)
		x.wg.Wait()
		x.p.Flush(5000)
		x.p.Close()
		_ = x.c.Close()
	})
}
