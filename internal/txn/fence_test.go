package txn

import (
	"errors"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Regression: after a broker restart longer than transaction.timeout.ms the
// coordinator had aborted the open transaction and bumped the epoch; the
// next call answered _FENCED and relay stopped as if it were a zombie. A
// fence that follows broker failures is recovered from with a new producer
// and a rewind.
func TestFenceAfterBrokerTroubleIsRecovered(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{errRetriable, errFenced}
	h := newHarness(t, first, second)
	c := h.c
	c.committed[0] = 7
	if err := h.run(c.assign(0), c.msg(0, 7), c.msg(0, 8)); err != nil {
		t.Fatalf("a fence after an outage stopped relay: %v", err)
	}
	if h.made != 2 || !first.closed {
		t.Fatalf("made %d producers (first closed: %v), want a new one", h.made, first.closed)
	}
	if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{0: 7}) {
		t.Fatalf("seeks %v, want partition 0 back to the committed 7", got)
	}
}

// A transaction that outlived transaction.timeout.ms was aborted by the
// coordinator: its fence is not a zombie's either.
func TestFenceOfExpiredTransactionIsRecovered(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{errFenced}
	h := newHarness(t, first, second)
	h.set.TxnTimeout = time.Nanosecond
	c := h.c
	if err := h.run(c.assign(0), c.msg(0, 0)); err != nil {
		t.Fatalf("fence of an expired transaction stopped relay: %v", err)
	}
	if h.made != 2 {
		t.Fatalf("made %d producers, want 2", h.made)
	}
}

// Two instances sharing a transactional.id during an outage must not fence
// each other in turn for ever: without a commit in between, the fourth
// fence stops relay.
func TestRepeatedFencesWithoutCommitStop(t *testing.T) {
	var prods []*fakeProducer
	for range maxFenceRecoveries + 1 {
		p := newFakeProducer()
		p.commitErrs = []error{errRetriable, errFenced}
		prods = append(prods, p)
	}
	h := newHarness(t, prods...)
	h.set.MaxRecords = 1 // each record commits
	c := h.c
	script := c.assign(0)
	err := h.run(script, c.msg(0, 0), c.msg(0, 0), c.msg(0, 0), c.msg(0, 0), c.msg(0, 0))
	if !errors.Is(err, ErrFatal) {
		t.Fatalf("Run = %v after %d fences without a commit, want ErrFatal", err, maxFenceRecoveries+1)
	}
}

// A zombie's fence is preceded by CONCURRENT_TRANSACTIONS (the new instance
// initialising): that is no outage, and the fence still stops relay.
func TestFenceAfterConcurrentTransactionsStops(t *testing.T) {
	first := newFakeProducer()
	first.commitErrs = []error{fakeErr{code: kafka.ErrConcurrentTransactions, retriable: true}, errFenced}
	h := newHarness(t, first)
	c := h.c
	if err := h.run(c.assign(0), c.msg(0, 0)); !errors.Is(err, ErrFatal) {
		t.Fatalf("Run = %v, want ErrFatal: a zombie must stop", err)
	}
	if h.made != 1 {
		t.Fatalf("made %d producers, want no replacement", h.made)
	}
}
