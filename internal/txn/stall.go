package txn

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaerr"
	"relay/internal/retry"
)

// A source partition is stalled when its records cannot be written: an
// output topic lacks its partition (partitions were added to the source),
// an output topic was deleted, a record is larger than the topic accepts.
// relay never skips such a record. The transaction that tried it is
// aborted, the partition rewound to its committed offset and held back
// (paused) with a growing backoff, and tried again; the other partitions
// go on meanwhile. The stall ends, by itself, with the first commit that
// moves the partition on. While it lasts, relay logs it at each try and
// exports the number of stalled partitions (relay_partitions_stalled).

// stallBackoff bounds how often a stalled partition is tried again: each
// try aborts a whole transaction, so it must stay rare, yet a fix by the
// operator should be picked up within seconds.
var stallBackoff = [2]time.Duration{500 * time.Millisecond, 20 * time.Second}

type stall struct {
	since    time.Time
	failures int
	sched    *backoff.ExponentialBackOff
	until    time.Time
	held     bool // paused until `until`
}

// deliveryFailures collects failed deliveries, reported asynchronously on
// the producer's event channel (delivery.report.only.error). A failed
// delivery puts the transaction in its abortable state; the report says
// which output partition failed, and so which source partition to hold.
type deliveryFailures struct {
	mu     sync.Mutex
	failed []kafka.TopicPartition
}

const maxDeliveryFailures = 1024

// add keeps a failed delivery that blames its partition.
// It reports whether tp is new among the kept failures, so a partition
// whose every queued record failed is logged once, not once a record.
func (d *deliveryFailures) add(tp kafka.TopicPartition) (first bool) {
	if !kafkaerr.PartitionFault(tp.Error) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := keyOf(tp)
	for _, f := range d.failed {
		if keyOf(f) == k {
			return false
		}
	}
	if len(d.failed) < maxDeliveryFailures {
		d.failed = append(d.failed, tp)
	}
	return true
}

func (d *deliveryFailures) take() []kafka.TopicPartition {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.failed
	d.failed = nil
	return out
}

// suspect names the source partition whose record could not be handled or
// written in the open transaction.
func (l *Loop) suspect(tp tpKey, err error) {
	l.suspects[tp] = err
}

// wrote notes which source partition wrote to an output partition in the
// open transaction, so a failed delivery can be traced back to it.
func (l *Loop) wrote(src tpKey, o *Output) {
	dst := tpKey{topic: o.Topic, partition: o.Partition}
	srcs := l.outSrc[dst]
	if n := len(srcs); n == 0 || srcs[n-1] != src {
		l.outSrc[dst] = append(srcs, src)
	}
}

// blame is the set of source partitions to hold back after the open
// transaction failed: the suspects, and the sources of failed deliveries.
// A delivery report may still be on its way when the abort returns (the
// client forwards it from another goroutine), so when the failure came
// from a delivery and none is in yet, it waits for one, briefly.
func (l *Loop) blame(async bool) map[tpKey]error {
	failed := l.deliveries.take()
	if async && len(failed) == 0 && len(l.suspects) == 0 {
		deadline := time.Now().Add(l.reportWait)
		for len(failed) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			failed = l.deliveries.take()
		}
	}
	out := make(map[tpKey]error, len(l.suspects))
	for tp, err := range l.suspects {
		out[tp] = err
	}
	for _, f := range failed {
		cause := fmt.Errorf("delivery to %s failed: %w", keyOf(f), f.Error)
		for dst, srcs := range l.outSrc {
			// An unknown partition may be reported without one.
			if dst.topic == topicOf(f) && (f.Partition < 0 || dst.partition == f.Partition) {
				for _, src := range srcs {
					out[src] = cause
				}
			}
		}
	}
	return out
}

// hold pauses the blamed partitions after the rewind, each until its
// backoff ends. It reports whether it held any.
func (l *Loop) hold(blamed map[tpKey]error) bool {
	now, held := time.Now(), false
	for tp, cause := range blamed {
		if !l.assigned[tp] {
			continue
		}
		st := l.stalls[tp]
		if st == nil {
			st = &stall{since: now, sched: retry.Schedule(stallBackoff[0], stallBackoff[1])}
			l.stalls[tp] = st
		}
		st.failures++
		wait := st.sched.NextBackOff()
		st.until = now.Add(wait)
		if !st.held {
			if err := l.consumer.Pause([]kafka.TopicPartition{tp.at(0)}); err != nil {
				l.fatal = fmt.Errorf("%w: pause %s: %w", ErrFatal, tp, err)
				return held
			}
			st.held = true
		}
		held = true
		l.log.Error("records of this partition cannot be written; it is held back and tried again, nothing is skipped",
			"topic", tp.topic, "partition", tp.partition, "failures", st.failures, "stalled_for", now.Sub(st.since).Round(time.Millisecond).String(),
			"retry_in", wait.Round(time.Millisecond).String(), "cause", cause, "hint", hint(cause))
	}
	l.obs.Stalled(len(l.stalls))
	return held
}

// hint says what an operator can do about a cause, where relay knows.
func hint(err error) string {
	switch {
	case kafkaerr.Missing(err):
		return "an output topic lacks this partition or is missing: give every derived topic at least the source's partitions (relay topics apply)"
	case kafkaerr.Is(err, kafka.ErrMsgSizeTooLarge):
		return "the record is larger than an output topic accepts: raise its max.message.bytes (and the producer's message.max.bytes)"
	default:
		return "see cause"
	}
}

// resumeStalls lets held partitions be tried again once their wait is over.
// The open transaction is committed first: a held partition that still
// cannot be written aborts the transaction it is tried in, and that one
// then holds little besides it, not the other partitions' work.
func (l *Loop) resumeStalls(now time.Time) {
	due := false
	for _, st := range l.stalls {
		due = due || (st.held && !now.Before(st.until))
	}
	if !due {
		return
	}
	if l.open {
		ctx := l.runCtx
		if ctx == nil {
			ctx = context.Background()
		}
		l.end(ctx, "stalled partition due")
		if l.fatal != nil {
			return
		}
	}
	for tp, st := range l.stalls {
		if !st.held || now.Before(st.until) {
			continue
		}
		if err := l.consumer.Resume([]kafka.TopicPartition{tp.at(0)}); err != nil {
			l.fatal = fmt.Errorf("%w: resume %s: %w", ErrFatal, tp, err)
			return
		}
		st.held = false
	}
}

// unstall ends the stalls of partitions a committed transaction moved on.
func (l *Loop) unstall() {
	if len(l.stalls) == 0 {
		return
	}
	for tp := range l.next {
		if st, ok := l.stalls[tp]; ok {
			l.log.Info("stalled partition writes again", "topic", tp.topic, "partition", tp.partition,
				"stalled_for", time.Since(st.since).Round(time.Millisecond).String(), "failures", st.failures)
			delete(l.stalls, tp)
		}
	}
	l.obs.Stalled(len(l.stalls))
}

// forgetStalls drops the stalls of partitions this member no longer owns.
func (l *Loop) forgetStalls(parts []kafka.TopicPartition) {
	n := len(l.stalls)
	for _, tp := range parts {
		delete(l.stalls, keyOf(tp))
	}
	if len(l.stalls) != n {
		l.obs.Stalled(len(l.stalls))
	}
}
