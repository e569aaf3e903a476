package txn

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// testWedgeAfter is the watchdog's bound in these tests: far above what a
// call of the fakes that is not wedged takes, even on a loaded machine, so
// that only the calls a test wedges are taken for wedged.
const testWedgeAfter = 500 * time.Millisecond

// wedgeObserver counts the watchdog's events, from any goroutine.
type wedgeObserver struct {
	countingObserver
	mu        sync.Mutex
	calls     []string
	abandoned int
}

func (o *wedgeObserver) Wedged(call string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, call)
}

func (o *wedgeObserver) Abandoned(d int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.abandoned += d
}

// wedged returns a producer whose call blocks until the next producer is
// initialised — as a librdkafka call that ignores its timeout returns
// once the broker it waits for is back — and that next producer.
func wedged(call string) (first, next *fakeProducer) {
	first, next = newFakeProducer(), newFakeProducer()
	release := make(chan struct{})
	first.wedge = map[string]chan struct{}{call: release}
	next.onInit = func() {
		first.fenced.Store(true) // the new epoch fences the wedged producer
		close(release)
	}
	return first, next
}

func (h *harness) runWatched(obs *wedgeObserver, c Consumer, script ...kafka.Event) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.c.script = script
	h.c.onIdle = cancel
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	done := make(chan error, 1)
	go func() { done <- New(h.set, c, h.factory, h.handler, log, obs).Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		h.t.Fatal("the loop hung in a wedged call: the watchdog did not fire")
		return nil
	}
}

// Regression (the three-broker rolling restart): librdkafka's
// SendOffsetsToTransaction ignored its timeout while the group
// coordinator's broker was away (confluentinc/librdkafka#5456), and the
// loop sat in it for minutes. The watchdog abandons the wedged producer:
// a new one with the same transactional id, a rewind to the committed
// offsets, the records handled again and committed; the wedged producer
// is closed once its call returns.
func TestWedgedCallGetsANewProducer(t *testing.T) {
	for _, call := range []string{"send", "commit", "begin"} {
		t.Run(call, func(t *testing.T) {
			// A begin wedges at the first record; a commit's calls after
			// the second.
			firstPass := []int64{7, 8}
			if call == "begin" {
				firstPass = []int64{7}
			}
			first, next := wedged(call)
			h := newHarness(t, first, next)
			h.set.WedgeAfter = testWedgeAfter
			h.set.MaxRecords = 2
			c := h.c
			c.committed[0] = 7
			obs := &wedgeObserver{}
			script := []kafka.Event{c.assign(0)}
			for _, off := range firstPass {
				script = append(script, c.msg(0, off))
			}
			script = append(script, sleepEvent(10*time.Millisecond), c.msg(0, 7), c.msg(0, 8))
			err := h.runWatched(obs, c, script...)
			if err != nil {
				t.Fatalf("Run = %v, want a recovery", err)
			}
			if h.made != 2 {
				t.Fatalf("made %d producers, want a second one", h.made)
			}
			if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{0: 7}) {
				t.Fatalf("seeks %v, want partition 0 back to the committed 7", got)
			}
			if next.committedTxns != 1 || !mapsEqual(offsetsOf(next.sentOffsets[0]), map[int32]int64{0: 9}) {
				t.Fatalf("the new producer committed %d transactions (%v), want the records again up to 9", next.committedTxns, next.sentOffsets)
			}
			// The reaper closes the wedged producer once its call has
			// returned; close waits for it only briefly.
			var closed bool
			var late, open int
			for range 100 {
				first.mu.Lock()
				closed, late = first.closed, first.committedTxns
				first.mu.Unlock()
				obs.mu.Lock()
				open = obs.abandoned
				obs.mu.Unlock()
				if closed && open == 0 {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if late != 0 {
				t.Fatalf("the wedged producer committed %d transactions after it was fenced", late)
			}
			if !closed {
				t.Fatal("the wedged producer was not closed once its call returned")
			}
			if len(obs.calls) != 1 || open != 0 {
				t.Fatalf("wedges %v, abandoned still open %d; want one, and none open", obs.calls, open)
			}
		})
	}
}

// An InitTransactions that never returns is abandoned the same way.
func TestWedgedInitGetsANewProducer(t *testing.T) {
	first, next := wedged("init")
	h := newHarness(t, first, next)
	h.set.WedgeAfter = testWedgeAfter
	c := h.c
	obs := &wedgeObserver{}
	if err := h.runWatched(obs, c, c.assign(0), c.msg(0, 0)); err != nil {
		t.Fatal(err)
	}
	if h.made != 2 || next.committedTxns != 1 {
		t.Fatalf("made %d producers, the second committed %d; want 2 and 1", h.made, next.committedTxns)
	}
}

// An abort whose Flush never returns is abandoned too, and the records go
// back to the committed offsets.
func TestWedgedFlushOfAbortGetsANewProducer(t *testing.T) {
	first, next := wedged("flush")
	first.produceErrs = []error{errOdd}
	h := newHarness(t, first, next)
	h.set.WedgeAfter = testWedgeAfter
	c := h.c
	c.committed[0] = 3
	obs := &wedgeObserver{}
	if err := h.runWatched(obs, c, c.assign(0), c.msg(0, 3), c.msg(0, 3)); err != nil {
		t.Fatal(err)
	}
	if h.made != 2 || next.committedTxns != 1 || len(obs.calls) != 1 || obs.calls[0] != "flush" {
		t.Fatalf("made %d producers, second committed %d, wedges %v", h.made, next.committedTxns, obs.calls)
	}
}

// Wedges are bounded: the fourth within the window stops relay, saying
// why, so an orchestrator restarts it.
func TestRepeatedWedgesStop(t *testing.T) {
	var prods []*fakeProducer
	release := make(chan struct{})
	for range maxWedges + 1 {
		p := newFakeProducer()
		p.wedge = map[string]chan struct{}{"commit": release}
		prods = append(prods, p)
	}
	defer close(release)
	h := newHarness(t, prods...)
	h.set.WedgeAfter = testWedgeAfter
	h.set.ShutdownTimeout = 2 * time.Second
	h.set.MaxRecords = 1
	c := h.c
	var script []kafka.Event
	script = append(script, c.assign(0))
	for range maxWedges + 1 {
		script = append(script, c.msg(0, 0))
	}
	obs := &wedgeObserver{}
	err := h.runWatched(obs, c, script...)
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "wedged") {
		t.Fatalf("Run = %v, want ErrFatal saying calls wedged", err)
	}
	if len(obs.calls) != maxWedges+1 {
		t.Fatalf("wedges %v, want %d", obs.calls, maxWedges+1)
	}
}

// stuckConsumer's Committed never returns until released.
type stuckConsumer struct {
	*fakeConsumer
	release chan struct{}
	closed  bool
}

func (c *stuckConsumer) Committed(parts []kafka.TopicPartition, ms int) ([]kafka.TopicPartition, error) {
	<-c.release
	return c.fakeConsumer.Committed(parts, ms)
}

func (c *stuckConsumer) Close() error { c.closed = true; return nil }

// A consumer cannot be replaced without leaving its group: a consumer call
// that never returns stops relay (exit 1), and close leaves it alone.
func TestWedgedConsumerCallStops(t *testing.T) {
	h := newHarness(t)
	h.set.WedgeAfter = testWedgeAfter
	h.prods[0].produceErrs = []error{errOdd}
	sc := &stuckConsumer{fakeConsumer: h.c, release: make(chan struct{})}
	defer close(sc.release)
	c := h.c
	obs := &wedgeObserver{}
	err := h.runWatched(obs, sc, c.assign(0), c.msg(0, 0))
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "consumer committed") {
		t.Fatalf("Run = %v, want ErrFatal naming the consumer's call", err)
	}
	if sc.closed {
		t.Fatal("closed a consumer whose call is wedged")
	}
}

// Regression (review of the watchdog): an InitTransactions abandoned as
// wedged may still get through, bump the epoch and fence the producer that
// replaced it, in a transaction far younger than transaction.timeout.ms.
// That fence is this instance's own: relay recovers with a new producer
// instead of stopping as if another instance shared its transactional id.
func TestFenceByALateInitIsRecovered(t *testing.T) {
	first, second := wedged("init")
	second.onInit = func() { close(first.wedge["init"]) } // it gets through
	second.commitErrs = []error{errFenced}
	third := newFakeProducer()
	h := newHarness(t, first, second, third)
	h.set.WedgeAfter = testWedgeAfter
	h.set.TxnTimeout = time.Hour
	h.set.MaxRecords = 1
	c := h.c
	c.committed[0] = 4
	obs := &wedgeObserver{}
	err := h.runWatched(obs, c, c.assign(0), c.msg(0, 4), sleepEvent(10*time.Millisecond), c.msg(0, 4))
	if err != nil {
		t.Fatalf("Run = %v, want a recovery from the fence of its own late init", err)
	}
	if h.made != 3 || third.committedTxns != 1 {
		t.Fatalf("made %d producers, the third committed %d; want 3 and 1", h.made, third.committedTxns)
	}
}

// A Close that never returns, at the end of a run, leaves the producer to
// its reaper; Run still returns, and the clients left running are
// reported, so the daemon keeps their log channel open.
func TestWedgedCloseIsLeft(t *testing.T) {
	p := newFakeProducer()
	h := newHarness(t, p)
	h.set.WedgeAfter = testWedgeAfter
	h.set.ShutdownTimeout = 2 * time.Second
	c := h.c
	obs := &wedgeObserver{}
	release := make(chan struct{})
	defer close(release)
	wc := &wedgingCloser{fakeProducer: p, release: release}
	h.prods[0] = p
	factory := func() (Producer, error) { return wc, nil }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.script = []kafka.Event{c.assign(0), c.msg(0, 0)}
	c.onIdle = cancel
	l := New(h.set, c, factory, h.handler, slog.New(slog.NewTextHandler(io.Discard, nil)), obs)
	if err := l.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if !l.ClientsLeft() || len(obs.calls) != 1 || obs.calls[0] != opClose {
		t.Fatalf("clients left %v, wedges %v; want the close left behind", l.ClientsLeft(), obs.calls)
	}
}

// wedgingCloser is a producer whose Close blocks until released.
type wedgingCloser struct {
	*fakeProducer
	release chan struct{}
}

func (w *wedgingCloser) Close() {
	<-w.release
	w.fakeProducer.Close()
}

// Regression (the rolling restart): a producer abandoned when its send
// offsets wedged, whose call never returned (librdkafka#5511), held the
// graceful stop for RELAY_SHUTDOWN_TIMEOUT waiting for its reaper, and
// relay exited 1 past its bound. The stop waits for it briefly only.
func TestStopDoesNotWaitForAWedgedCall(t *testing.T) {
	first, next := newFakeProducer(), newFakeProducer()
	never := make(chan struct{})
	defer close(never) // released only after Run
	first.wedge = map[string]chan struct{}{"send": never}
	h := newHarness(t, first, next)
	h.set.WedgeAfter = testWedgeAfter
	h.set.ShutdownTimeout = time.Minute
	h.set.MaxRecords = 1
	c := h.c
	obs := &wedgeObserver{}
	began := time.Now()
	if err := h.runWatched(obs, c, c.assign(0), c.msg(0, 0), sleepEvent(10*time.Millisecond), c.msg(0, 0)); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("Run took %s: it waited for the wedged call", took)
	}
	if next.committedTxns != 1 {
		t.Fatalf("the new producer committed %d transactions, want 1", next.committedTxns)
	}
}
