package txn

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Issue: a process frozen past the session and the transaction timeout
// thawed beside the twin that had taken its place. Its queued records
// timed out, relay aborted, and librdkafka ended the abort with an epoch
// bump (InitProducerId under the current epoch, KIP-360), which the
// broker took for this instance's own and used to fence the twin's
// producer: the live twin stopped, and the thawed process went on. A
// static member that may have been replaced makes no call that can bump
// the epoch — no abort, no new producer — before the coordinator's
// verdict.

// With a twin, the coordinator refuses the consumer: the loop stops
// without aborting on the old producer or starting a new one.
func TestAbortAfterAFreezeWithATwinBumpsNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"abortable", errAbortable}, // the abort that bumps the epoch
		{"outcome unknown", errOdd}, // a new producer's InitTransactions
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := frozenRunFailing(t, true, tc.err, twinErr)
			if !errors.Is(err, ErrInstanceFenced) {
				t.Fatalf("Run = %v, want ErrInstanceFenced", err)
			}
			if h.made != 1 {
				t.Errorf("made %d producers; a new one fences the twin", h.made)
			}
			if calls := h.prods[0].calls; slices.Contains(calls, "abort") {
				t.Errorf("producer calls %v: an abort after the freeze may bump the epoch and fence the twin", calls)
			}
		})
	}
}

// Without a twin (the group takes the member back), the loop goes on
// with a new producer, whose InitTransactions settles the transaction the
// old one left open, and rewinds.
func TestAbortAfterAFreezeWithoutATwinRenews(t *testing.T) {
	h, err := frozenRunFailing(t, true, errAbortable, h0assign(), h0msg(0))
	if err != nil {
		t.Fatalf("Run = %v, want a recovery", err)
	}
	if h.made != 2 {
		t.Fatalf("made %d producers, want a new one", h.made)
	}
	if calls := h.prods[0].calls; slices.Contains(calls, "abort") {
		t.Errorf("producer calls %v: aborted before the verdict", calls)
	}
	if got := offsetsOf(h.c.seeks); !mapsEqual(got, map[int32]int64{0: 0}) {
		t.Fatalf("seeks %v, want partition 0 back to the committed 0", got)
	}
}

// Nothing changes where nothing says the group moved on: an abortable
// commit aborts on the same producer, at once.
func TestAbortWithoutAFreezeIsNotHeld(t *testing.T) {
	first := newFakeProducer()
	first.commitErrs = []error{errAbortable}
	h := newHarness(t, first)
	h.set.StaticMember = true
	h.set.SessionTimeout = 30 * time.Millisecond
	h.set.MaxRecords = 1
	c := h.c
	if err := h.run(c.assign(0), c.msg(0, 0)); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if !slices.Contains(first.calls, "abort") || h.made != 1 {
		t.Errorf("calls %v, made %d: want an abort on the same producer", first.calls, h.made)
	}
}

// A dynamic member cannot ask the coordinator: it aborts as before (one
// of two processes sharing a transactional.id then goes on; see fence.go).
func TestAbortAfterAFreezeOfADynamicMemberIsNotHeld(t *testing.T) {
	h, _ := frozenRunFailing(t, false, errAbortable, kafka.Event(nil))
	if !slices.Contains(h.prods[0].calls, "abort") {
		t.Errorf("calls %v: want the abort", h.prods[0].calls)
	}
}

// Issue: a twin whose group.instance.id the thawed process took back had
// its offsets refused (FENCED_INSTANCE_ID, an abortable error): it
// aborted, its rewind failed on the refused consumer ("Erroneous state"),
// and its close of that consumer waited 30 s for the watchdog. The
// refusal is the coordinator's word that another member holds the id:
// the loop ends as on the consumer's own refusal, and its caller watches
// the group.
func TestOffsetsRefusedForTheInstanceEndTheLoop(t *testing.T) {
	first := newFakeProducer()
	first.commitErrs = []error{fakeErr{code: kafka.ErrFencedInstanceID, abort: true}}
	h := newHarness(t, first)
	h.set.StaticMember = true
	h.set.MaxRecords = 1
	c := h.c
	err := h.run(c.assign(0), c.msg(0, 0))
	if !errors.Is(err, ErrInstanceFenced) {
		t.Fatalf("Run = %v, want ErrInstanceFenced", err)
	}
	if h.c.closed || slices.Contains(first.calls, "abort") || len(h.c.seeks) > 0 {
		t.Errorf("closed %v, calls %v, seeks %v: want the refused consumer left alone, no abort, no rewind", h.c.closed, first.calls, h.c.seeks)
	}
}
