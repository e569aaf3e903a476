package txn

import (
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
