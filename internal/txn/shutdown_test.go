package txn

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Regression (a CI failure of TestRebalanceMidFailures): SIGTERM arrived
// while the handler waited on the registry; it returned context.Canceled,
// the loop aborted, the abort failed and relay exited 1 after SIGTERM. A
// handler interrupted by shutdown leaves its record in the source; what was
// handled before it commits, and Run returns nil.
func TestHandlerInterruptedByShutdownCommits(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.handler = HandlerFunc(func(c context.Context, r *Record) ([]Output, error) {
		if r.Offset == 2 {
			cancel() // SIGTERM while this record waits on a dependency
			<-c.Done()
			return nil, c.Err()
		}
		return []Output{{Topic: "out", Partition: r.Partition}}, nil
	})
	c := h.c
	c.script = []kafka.Event{c.assign(0), c.msg(0, 0), c.msg(0, 1), c.msg(0, 2)}
	p := h.prods[0]
	err := New(h.set, c, func() (Producer, error) { return p, nil }, h.handler, discard(), h.obs).Run(ctx)
	if err != nil {
		t.Fatalf("Run = %v after an interrupted handler, want nil", err)
	}
	if p.abortedTxns != 0 || p.committedTxns != 1 {
		t.Fatalf("aborted %d, committed %d; want the handled records committed", p.abortedTxns, p.committedTxns)
	}
	if got := offsetsOf(p.sentOffsets[0]); !mapsEqual(got, map[int32]int64{0: 2}) {
		t.Fatalf("committed %v, want partition 0 at 2: the interrupted record stays in the source", got)
	}
}

// The root cause of that INVALID_TXN_STATE: an abort while the
// transaction's first AddPartitionsToTxn is still being retried reaches a
// coordinator that never saw the transaction. The loop flushes first, so
// the registration completes, and a fatal INVALID_TXN_STATE that still
// comes is settled with a new producer, not an exit.
func TestAbortFlushesFirstAndSurvivesInvalidTxnState(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{errAbortable}
	first.abortErrs = []error{fakeErr{code: kafka.ErrInvalidTxnState, fatalF: true}}
	h := newHarness(t, first, second)
	c := h.c
	c.committed[0] = 5
	if err := h.run(c.assign(0), c.msg(0, 5)); err != nil {
		t.Fatalf("Run = %v, want relay to carry on with a new producer", err)
	}
	i := slices.Index(first.calls, "abort")
	if i < 1 || first.calls[i-1] != "flush" {
		t.Fatalf("calls %v: want a flush right before the abort", first.calls)
	}
	if h.made != 2 {
		t.Fatalf("made %d producers, want 2", h.made)
	}
	if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{0: 5}) {
		t.Fatalf("seeks %v, want partition 0 back to 5", got)
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Review finding: SIGTERM landed while a record was handled, and the
// transaction was due in the same round. The loop ended it with the
// cancelled context, so a retriable first commit error was not tried
// again, the producer was re-initialised and what was handled was redone
// after the restart. The shutdown commit runs under its own bound.
func TestShutdownCommitIsNotCutShortByTheSignal(t *testing.T) {
	p := newFakeProducer()
	p.commitErrs = []error{errRetriable}
	h := newHarness(t, p)
	h.set.CommitInterval = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.handler = HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
		if r.Offset == 1 {
			cancel()                           // SIGTERM while this record is handled…
			time.Sleep(250 * time.Millisecond) // …and the transaction is due
		}
		return []Output{{Topic: "out", Partition: r.Partition}}, nil
	})
	c := h.c
	c.script = []kafka.Event{c.assign(0), c.msg(0, 0), c.msg(0, 1)}
	err := New(h.set, c, h.factory, h.handler, discard(), h.obs).Run(ctx)
	if err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if h.made != 1 || p.committedTxns != 1 {
		t.Fatalf("made %d producers, committed %d transactions (calls %v); want the shutdown commit tried again on one producer",
			h.made, p.committedTxns, p.calls)
	}
	if got := offsetsOf(p.sentOffsets[len(p.sentOffsets)-1]); !mapsEqual(got, map[int32]int64{0: 2}) {
		t.Fatalf("committed %v, want partition 0 at 2: both handled records", got)
	}
}

// Seen in the rolling restart under load: a produce timed out in flight
// while a broker restarted, and the next transaction's first batch to
// that partition was refused with OUT_OF_ORDER_SEQUENCE_NUMBER, which
// librdkafka makes fatal ("sequence desynchronization"). No other
// instance is involved: relay settles it with a new producer (whose
// InitProducerId aborts what the old epoch wrote) and a rewind, within
// the recoveries' bound, instead of stopping.
func TestOutOfOrderSequenceIsSettledWithANewProducer(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{fakeErr{code: kafka.ErrOutOfOrderSequenceNumber, fatalF: true}}
	h := newHarness(t, first, second)
	c := h.c
	c.committed[0] = 5
	if err := h.run(c.assign(0), c.msg(0, 5)); err != nil {
		t.Fatalf("Run = %v, want relay to carry on with a new producer", err)
	}
	if h.made != 2 {
		t.Fatalf("made %d producers, want 2", h.made)
	}
	if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{0: 5}) {
		t.Fatalf("seeks %v, want partition 0 back to 5", got)
	}
	if first.committedTxns != 0 {
		t.Fatalf("the first producer committed %d transactions, want 0", first.committedTxns)
	}
}
