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
	for {
		h, err := l.initProducer(ctx)
		if err == nil {
			l.producer = h
			l.lostSinceInit = false
			return nil
		}
		// An InitTransactions that wedged has its producer abandoned
		// already: the next one fences it, unless that was one wedge
		// too many.
		if l.fatal != nil {
			return l.fatal
		}
		if !isWedged(err) {
			return err
		}
	}
}

// initProducer makes a producer and initialises its transactions.
func (l *Loop) initProducer(ctx context.Context) (*handle, error) {
	p, err := l.newProducer()
	if err != nil {
		return nil, fmt.Errorf("%w: create producer: %w", ErrFatal, err)
	}
	h := &handle{Producer: p, drained: make(chan struct{}), lastOK: map[tpKey]int64{}}
	go l.drainEvents(h)
	// After a crash or during a broker outage the coordinator may be
	// unavailable or still completing the previous epoch: wait for it, as
	// long as the error is not fatal. Nothing is consumed meanwhile.
	err = l.persist(ctx, "init transactions", func() error {
		return l.producerCall(h, opInit, func() error {
			c, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.set.OpTimeout)
			defer cancel()
			return h.InitTransactions(c)
		})
	})
	if err != nil && !isWedged(err) {
		l.dispose(h)
	}
	return h, err
}

// blockedCoordinator is how long InitTransactions may be refused with
// CONCURRENT_TRANSACTIONS before relay says why: the coordinator completes
// the previous transaction within seconds unless it cannot write that
// transaction's markers.
const blockedCoordinator = 30 * time.Second

// persist makes a call again, with backoff, until it succeeds, fails
// fatally, or ctx ends. It is for calls relay cannot go on without and that
// a broker outage makes fail for as long as the outage lasts.
func (l *Loop) persist(ctx context.Context, op string, call func() error) error {
	start, warned := time.Now(), time.Time{}
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := call()
		switch {
		case err == nil:
			return struct{}{}, nil
		case errors.Is(err, ErrFatal), isWedged(err):
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
			// A refused credential can keep relay here (the producer's
			// InitTransactions) and never back to a round of the loop.
			l.checkRefused(time.Time{})
			l.log.Warn("kafka call failed; retrying", "op", op, "err", err, "in", in.String())
			if kafkaerr.Is(err, kafka.ErrConcurrentTransactions) && time.Since(start) >= blockedCoordinator && time.Since(warned) >= blockedCoordinator {
				warned = time.Now()
				l.log.Error("the transaction coordinator cannot complete this instance's previous transaction: a partition that transaction wrote to takes no writes (no leader, or fewer in-sync replicas than its min.insync.replicas; the brokers log \"transaction marker for partition … has failed\"); nothing commits under this transactional id until it does, and relay resumes by itself, losing nothing",
					"op", op, "waiting_for", time.Since(start).Round(time.Second).String())
			}
		}))
	if err != nil && !errors.Is(err, ErrFatal) && ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	return err
}

// drainEvents logs client errors (and failed deliveries, should reports be
// on). It ends when the producer is closed. The reports of an abandoned
// producer (see watchdog.go) concern no transaction of the loop's.
func (l *Loop) drainEvents(h *handle) {
	defer close(h.drained)
	var n int64 // reports so far, each one record's
	for ev := range h.Events() {
		switch e := ev.(type) {
		case *kafka.Message:
			n++
			select { // room in the queue for a produce waiting on it
			case l.room <- struct{}{}:
			default:
			}
			// Good deliveries come too (the Go client reports all or
			// none); only failures matter, and of those only the first
			// of each partition is worth a log line: when a transaction
			// turns abortable every queued record fails with it.
			if e.TopicPartition.Error == nil {
				h.noteDelivered(e.TopicPartition, n-1)
				continue
			}
			if !h.abandoned.Load() && l.deliveries.add(e.TopicPartition, n-1) {
				l.log.Error("delivery failed; the transaction will abort", "topic", topicOf(e.TopicPartition), "partition", e.TopicPartition.Partition, "err", e.TopicPartition.Error)
			}
		case *kafka.Stats:
			if !h.abandoned.Load() {
				l.obs.Statistics(kindProducer, e.String())
			}
		case kafka.Error:
			if credentialError(e) && !h.abandoned.Load() {
				l.noteRefused("producer", e)
			}
			l.log.Warn("producer error", "err", e, "code", e.Code().String(), "fatal", e.IsFatal(), "abandoned", h.abandoned.Load())
		}
	}
}

// noteDelivered notes that the n-th report said tp took its record.
func (h *handle) noteDelivered(tp kafka.TopicPartition, n int64) {
	k := keyOf(tp)
	h.mu.Lock()
	h.lastOK[k] = n
	h.mu.Unlock()
}

// deliveredSince says whether partition k took a record reported from the
// from-th report on (of the open transaction, for from = txnFrom).
func (h *handle) deliveredSince(k tpKey, from int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	n, ok := h.lastOK[k]
	return ok && n >= from
}

// closeProducer closes the loop's producer, under the watchdog: a Close
// that does not return leaves the producer to a reaper.
func (l *Loop) closeProducer() {
	if l.producer == nil {
		return
	}
	l.dispose(l.producer)
	l.producer = nil
}

// dispose closes h. Purge first, so Close does not wait for messages of a
// transaction that is being given up anyway.
func (l *Loop) dispose(h *handle) {
	_ = l.producerCall(h, opClose, func() error {
		_ = h.Purge(kafka.PurgeQueue | kafka.PurgeInFlight | kafka.PurgeNonBlocking)
		h.Close()
		<-h.drained
		return nil
	})
}

// close ends both clients; the consumer first, so the group hears of our
// leaving while the producer's last transaction is already settled.
func (l *Loop) close() error {
	var err error
	fatal := l.fatal
	if !l.detached.Load() {
		err = l.consumerCall("close", l.set.ShutdownTimeout, l.consumer.Close)
	}
	if err != nil && l.detached.Load() {
		// A close that did not return may still be serving a revoke on
		// its goroutine: the producer is left as it is, and the process
		// ends (see ClientsLeft).
		return fmt.Errorf("close consumer: %w", err)
	}
	l.closeProducer()
	// A wedged producer whose call has not returned by now may never
	// return (librdkafka#5511): waiting for it would only eat into the
	// shutdown bound. The process ends without it (see ClientsLeft).
	l.waitReapers(reaperWait)
	if err != nil {
		return fmt.Errorf("close consumer: %w", err)
	}
	if fatal == nil && l.fatal != nil && isWedged(l.fatal) {
		// A wedge past the bound while closing. (Not whatever a
		// rebalance served by the consumer's close ran into: an
		// assignment restoring its state when a signal cancelled it is
		// no failure.)
		return l.fatal
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
		if err == nil {
			l.producer.produced++
			l.clocked() // AddPartitionsToTxn may go out from now on
			return nil
		}
		if !kafkaerr.Is(err, kafka.ErrQueueFull) {
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

// retry makes a transactional call (op) into the producer, each attempt
// with its own deadline and under the watchdog, again while librdkafka
// says the error is retriable.
func (l *Loop) retry(ctx context.Context, op string, call func(context.Context) error) error {
	var err error
	for range opAttempts {
		l.obs.Alive() // each try is a stretch of its own for the liveness bound
		l.checkRefused(time.Time{})
		// A call in flight is not cut short by shutdown: a commit that
		// is about to succeed should. Each call has its own deadline.
		err = l.producerCall(l.producer, op, func() error {
			c, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.set.OpTimeout)
			defer cancel()
			return call(c)
		})
		if kafkaerr.Classify(err) != kafkaerr.Retriable || ctx.Err() != nil {
			return err
		}
	}
	return err
}
