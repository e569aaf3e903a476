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
// the producer's event channel. A failed delivery puts the transaction in
// its abortable state; the report says which output partition failed, and
// so which source partition to hold.
//
// Each report carries its ordinal on the producer: the Go client reports
// every delivery, and librdkafka settles every message of a transaction
// (delivered, failed or purged) before its commit or abort returns, so the
// reports of one transaction all come before any of the next. A report
// whose ordinal is below the number of messages produced before the open
// transaction began is a late one of an earlier transaction, and blames
// nothing now.
type deliveryFailures struct {
	mu     sync.Mutex
	failed []failure
}

type failure struct {
	tp kafka.TopicPartition
	n  int64 // ordinal of the latest such report on its producer
	// fault: the partition refused the record (see PartitionFault);
	// otherwise the record was not delivered in time (see Undelivered).
	fault bool
}

const maxDeliveryFailures = 1024

// add keeps a failed delivery, the n-th report of its producer, that may
// blame its partition. It reports whether tp is new among the kept
// failures, so a partition whose every queued record failed is logged
// once, not once a record.
func (d *deliveryFailures) add(tp kafka.TopicPartition, n int64) (first bool) {
	fault := kafkaerr.PartitionFault(tp.Error)
	if !fault && !kafkaerr.Undelivered(tp.Error) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := keyOf(tp)
	for i := range d.failed {
		if f := &d.failed[i]; keyOf(f.tp) == k && f.fault == fault {
			f.n = max(f.n, n)
			return false
		}
	}
	if len(d.failed) < maxDeliveryFailures {
		d.failed = append(d.failed, failure{tp: tp, n: n, fault: fault})
	}
	return true
}

// take removes the kept failures and gives those of reports from the
// from-th on.
func (d *deliveryFailures) take(from int64) []failure {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []failure
	for _, f := range d.failed {
		if f.n >= from {
			out = append(out, f)
		}
	}
	d.failed = nil
	return out
}

// clear drops every kept failure.
func (d *deliveryFailures) clear() { _ = d.take(0) }

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
// transaction failed: the suspects, the sources of partitions that refused
// a record, and, when some output partitions of the transaction took their
// records and others did not (see partial), the sources of those that did
// not. A delivery report may still be on its way when the abort returns
// (the client forwards it from another goroutine), so when the failure
// came from a delivery and none is in yet, it waits for one, briefly.
func (l *Loop) blame(async bool) map[tpKey]error {
	from := l.txnFrom
	failed := l.deliveries.take(from)
	if async && len(l.suspects) == 0 {
		deadline := time.Now().Add(l.reportWait)
		for !anyFault(failed) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			failed = append(failed, l.deliveries.take(from)...)
		}
	}
	out := make(map[tpKey]error, len(l.suspects))
	for tp, err := range l.suspects {
		out[tp] = err
	}
	partial := l.partial(l.producer, failed)
	for _, f := range failed {
		if !f.fault && !partial {
			continue
		}
		cause := fmt.Errorf("delivery to %s failed: %w", keyOf(f.tp), f.tp.Error)
		for _, src := range l.sourcesOf(f.tp) {
			out[src] = cause
		}
	}
	return out
}

func anyFault(failed []failure) bool {
	for _, f := range failed {
		if f.fault {
			return true
		}
	}
	return false
}

// sourcesOf gives the source partitions that wrote to the output
// partition of a failed delivery in the open transaction. (An unknown
// partition may be reported without one.)
func (l *Loop) sourcesOf(tp kafka.TopicPartition) []tpKey {
	var out []tpKey
	for dst, srcs := range l.outSrc {
		if dst.topic == topicOf(tp) && (tp.Partition < 0 || dst.partition == tp.Partition) {
			out = append(out, srcs...)
		}
	}
	return out
}

// partial reports whether an output partition of the open transaction
// delivered a record of it (h says so) while the failures name others as
// undelivered: those others are to blame, not the brokers as a whole.
// (When nothing was delivered, it is an outage, and no partition is held
// for it.)
func (l *Loop) partial(h *handle, failed []failure) bool {
	undelivered := map[tpKey]bool{}
	for _, f := range failed {
		if !f.fault {
			undelivered[keyOf(f.tp)] = true
		}
	}
	if len(undelivered) == 0 || h == nil {
		return false
	}
	for dst := range l.outSrc {
		if !undelivered[dst] && h.deliveredSince(dst, l.txnFrom) {
			return true
		}
	}
	return false
}

// blameSilent is the set of source partitions to hold back after a commit
// timed out on h: those that wrote to an output partition that delivered
// none of the transaction's records while another delivered some. (A
// record that cannot be written for want of in-sync replicas or a leader
// is retried by librdkafka until it expires, far past the commit's
// timeout: no report names it before.) When no output partition
// delivered anything, it is an outage, and no partition is held for it.
func (l *Loop) blameSilent(h *handle) map[tpKey]error {
	if h == nil {
		return nil
	}
	var silent []tpKey
	some := false
	for dst := range l.outSrc {
		if h.deliveredSince(dst, l.txnFrom) {
			some = true
		} else {
			silent = append(silent, dst)
		}
	}
	out := map[tpKey]error{}
	for _, dst := range silent {
		cause := fmt.Errorf("%s delivered none of the transaction's records within the commit's timeout while other partitions did: %w", dst, kafka.NewError(kafka.ErrTimedOut, "commit timed out", false))
		for _, src := range l.outSrc[dst] {
			// A partition stalled already is held again even when
			// nothing else was in the transaction to compare with.
			if _, stalled := l.stalls[src]; some || stalled {
				out[src] = cause
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
	case kafkaerr.Undelivered(err):
		return "an output partition takes no writes while others do: check its leader and in-sync replicas against the topic's min.insync.replicas (relay topics check)"
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

// forgetStalls sets aside the stalls of partitions this member no longer
// owns. A partition that comes back (an eager rebalance revokes every
// partition and assigns most of them again) keeps its backoff: a rebalance
// does not make a partition that cannot be written try again at once.
func (l *Loop) forgetStalls(parts []kafka.TopicPartition) {
	n := len(l.stalls)
	for _, tp := range parts {
		k := keyOf(tp)
		if st, ok := l.stalls[k]; ok {
			st.held = false // a revoked partition is not paused
			l.revokedStalls[k] = st
			delete(l.stalls, k)
		}
	}
	if len(l.stalls) != n {
		l.obs.Stalled(len(l.stalls))
	}
}

// restoreStalls takes the stalls of assigned partitions back, and holds
// those whose backoff has not ended. It is called after the assignment is
// resumed.
func (l *Loop) restoreStalls(parts []kafka.TopicPartition) {
	if len(l.revokedStalls) == 0 {
		return
	}
	now := time.Now()
	for _, tp := range parts {
		k := keyOf(tp)
		st, ok := l.revokedStalls[k]
		if !ok {
			continue
		}
		delete(l.revokedStalls, k)
		l.stalls[k] = st
		if now.Before(st.until) {
			if err := l.consumer.Pause([]kafka.TopicPartition{k.at(0)}); err != nil {
				l.fatal = fmt.Errorf("%w: pause %s: %w", ErrFatal, k, err)
				return
			}
			st.held = true
		}
	}
	// Stalls of partitions that went to other members are kept no
	// longer than a backoff could last.
	for k, st := range l.revokedStalls {
		if now.Sub(st.until) > stallBackoff[1] {
			delete(l.revokedStalls, k)
		}
	}
	l.obs.Stalled(len(l.stalls))
}
