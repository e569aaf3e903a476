package txn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Regression: after a broker outage longer than transaction.timeout.ms the
// coordinator had aborted the open transaction and bumped the epoch; the
// next call answered _FENCED and relay stopped as if it were a zombie. A
// fence of a transaction older than the timeout is the coordinator's: it is
// recovered from with a new producer and a rewind.
func TestFenceOfExpiredTransactionIsRecovered(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{errRetriable, errFenced}
	h := newHarness(t, first, second)
	h.set.TxnTimeout = time.Nanosecond
	c := h.c
	c.committed[0] = 7
	if err := h.run(c.assign(0), c.msg(0, 7), c.msg(0, 8)); err != nil {
		t.Fatalf("fence of an expired transaction stopped relay: %v", err)
	}
	if h.made != 2 || !first.closed {
		t.Fatalf("made %d producers (first closed: %v), want a new one", h.made, first.closed)
	}
	if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{0: 7}) {
		t.Fatalf("seeks %v, want partition 0 back to the committed 7", got)
	}
}

// A fence of a young transaction is another instance's, even right after
// broker errors (a zombie was often cut off before it came back): relay
// stops, and names the likely cause.
func TestFenceOfYoungTransactionStops(t *testing.T) {
	first := newFakeProducer()
	first.commitErrs = []error{errRetriable, errFenced}
	h := newHarness(t, first)
	h.set.TxnTimeout = time.Hour
	c := h.c
	err := h.run(c.assign(0), c.msg(0, 0))
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "RELAY_TRANSACTIONAL_ID") {
		t.Fatalf("Run = %v, want ErrFatal naming RELAY_TRANSACTIONAL_ID", err)
	}
	if h.made != 1 {
		t.Fatalf("made %d producers, want no replacement", h.made)
	}
}

// Two instances sharing a transactional.id must not fence each other in
// turn for ever: commits in between or not, the fourth recovery within the
// window stops relay.
func TestRepeatedFencesStop(t *testing.T) {
	var prods []*fakeProducer
	for range maxRecoveries + 1 {
		p := newFakeProducer()
		p.commitErrs = []error{nil, errFenced} // one commit, then fenced
		prods = append(prods, p)
	}
	h := newHarness(t, prods...)
	h.set.MaxRecords = 1
	h.set.TxnTimeout = time.Nanosecond
	c := h.c
	script := []kafka.Event{c.assign(0)}
	for i := range 2 * (maxRecoveries + 1) {
		script = append(script, c.msg(0, int64(i)))
	}
	err := h.run(script...)
	if !errors.Is(err, ErrFatal) {
		t.Fatalf("Run = %v after %d fences, want ErrFatal", err, maxRecoveries+1)
	}
}

// Review finding: the coordinator starts a transaction's clock at its
// first AddPartitionsToTxn, not at BeginTransaction. A handler that ran
// past transaction.timeout.ms before the first produce (a stuck hook, a
// frozen process) made a fence that a live instance sharing the id caused
// look like the coordinator's: relay recovered, and its InitTransactions
// fenced the live instance. The age counts from the first produce.
func TestFenceAfterAStallBeforeTheFirstProduceStops(t *testing.T) {
	first := newFakeProducer()
	first.commitErrs = []error{errFenced}
	h := newHarness(t, first)
	h.set.TxnTimeout = 30 * time.Millisecond
	h.handler = HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
		time.Sleep(50 * time.Millisecond) // past the timeout, before the first produce
		return []Output{{Topic: "out", Partition: r.Partition}}, nil
	})
	c := h.c
	err := h.run(c.assign(0), c.msg(0, 0))
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "RELAY_TRANSACTIONAL_ID") {
		t.Fatalf("Run = %v, want ErrFatal: the coordinator never heard of the transaction, so the fence is another instance's", err)
	}
	if h.made != 1 {
		t.Fatalf("made %d producers, want no replacement (it would fence the live instance)", h.made)
	}
}

// The other order: the first produce, then a stall past the transaction
// timeout but within the session timeout. The membership held, so no
// replacement can own the partitions: the fence is the coordinator's, and
// relay recovers.
func TestFenceAfterAStallWithinTheSessionIsRecovered(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{errFenced}
	h := newHarness(t, first, second)
	h.set.TxnTimeout = 30 * time.Millisecond
	h.set.SessionTimeout = time.Hour
	c := h.c
	if err := h.run(c.assign(0), c.msg(0, 0), sleepEvent(50*time.Millisecond), c.msg(0, 1)); err != nil {
		t.Fatalf("Run = %v, want a recovery from the coordinator's fence", err)
	}
	if h.made != 2 {
		t.Fatalf("made %d producers, want a new one", h.made)
	}
}

// A loop that stalled past the session timeout (the process frozen) has
// lost its membership: a replacement with its transactional id may be
// live, and relay stops rather than fence it back, however old the
// transaction.
func TestFenceAfterAStallPastTheSessionStops(t *testing.T) {
	first := newFakeProducer()
	first.commitErrs = []error{errFenced}
	h := newHarness(t, first)
	h.set.TxnTimeout = time.Nanosecond
	h.set.SessionTimeout = 30 * time.Millisecond
	c := h.c
	err := h.run(c.assign(0), c.msg(0, 0), sleepEvent(50*time.Millisecond), c.msg(0, 1))
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "session.timeout.ms") {
		t.Fatalf("Run = %v, want ErrFatal naming the stall past session.timeout.ms", err)
	}
	if h.made != 1 {
		t.Fatalf("made %d producers, want no replacement", h.made)
	}
}

// Likewise when the consumer reports its assignment lost.
func TestFenceWithTheAssignmentLostStops(t *testing.T) {
	first := newFakeProducer()
	first.abortErrs = []error{errFenced} // a lost assignment aborts
	h := newHarness(t, first)
	h.set.TxnTimeout = time.Nanosecond
	c := h.c
	err := h.run(c.assign(0), c.msg(0, 0), lostEvent{})
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "lost its assignment") {
		t.Fatalf("Run = %v, want ErrFatal naming the lost assignment", err)
	}
	if h.made != 1 {
		t.Fatalf("made %d producers, want no replacement", h.made)
	}
}
