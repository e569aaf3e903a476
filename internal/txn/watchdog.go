package txn

// The watchdog bounds librdkafka's blocking calls. Each has a timeout of
// its own, and librdkafka does not always keep it: a coordinator
// request's timeout is never checked (confluentinc/librdkafka#5456), so
// rd_kafka_send_offsets_to_transaction blocks for as long as the group
// coordinator's broker is away or frozen; and a coordinator cached on a
// broker that was decommissioned while it was down is never looked up
// again (#5511), so the call can block for good after a rolling restart.
//
// A producer call that has not returned well past its timeout marks the
// producer wedged. The loop stops calling into it and goes on as after an
// unknown commit outcome: a new producer with the same transactional.id,
// whose InitTransactions fences the wedged one's epoch and makes the
// coordinator settle the transaction it left open (KIP-98), then a rewind
// to the committed offsets. The wedged producer is closed when its call
// returns; until then it is counted. A consumer cannot be replaced that
// way — it holds the group membership — so a wedged consumer call stops
// relay, for an orchestrator to restart it.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// WedgedError says a call into librdkafka did not return within its
// bound.
type WedgedError struct {
	Call  string
	After time.Duration
}

func (e *WedgedError) Error() string {
	return fmt.Sprintf("librdkafka's %s did not return within %s, past its own timeout (known librdkafka hangs: confluentinc/librdkafka#5456, #5511)", e.Call, e.After)
}

// Wedges are bounded like fence recoveries: at most maxWedges within
// wedgeWindow, and at most maxWedges wedged producers open at once (each
// holds its threads and buffers until its call returns). Past the bound
// relay stops, for an orchestrator to restart the process.
const (
	maxWedges   = 3
	wedgeWindow = 10 * time.Minute
)

// handle is one producer and the goroutine that drains its events.
type handle struct {
	Producer
	drained chan struct{}
	// abandoned is set when the producer is wedged: its delivery reports
	// no longer concern the loop's transactions.
	abandoned atomic.Bool
	// produced counts the records the loop gave it, for the ordinals of
	// delivery reports (see deliveryFailures).
	produced int64
	// lastOK is, per output partition, the ordinal of its latest
	// delivered record (see blameSilent).
	mu     sync.Mutex
	lastOK map[tpKey]int64
}

// errAbandoned is what the watchdog gives for a call into a producer the
// loop has already abandoned (it is not called again).
var errAbandoned = errors.New("producer abandoned after a wedged call")

// producerCall makes call, a blocking call into h, under the watchdog. A
// call that does not return within WedgeAfter abandons h (see abandon)
// and gives a *WedgedError; when that wedge is past the bound, l.fatal
// says so too.
func (l *Loop) producerCall(h *handle, op string, call func() error) error {
	if h == nil || h.abandoned.Load() {
		return errAbandoned
	}
	done, err := within(l.set.WedgeAfter, call)
	if done == nil {
		return err
	}
	l.abandon(h, op, done)
	return &WedgedError{Call: op, After: l.set.WedgeAfter}
}

// within runs call on a goroutine of its own and waits for it at most d.
// A nil done: call returned err. Otherwise call is still running, and
// whoever goes on waiting for done owns its goroutine.
func within(d time.Duration, call func() error) (done <-chan error, err error) {
	ch := make(chan error, 1)
	go func() { ch <- call() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-ch:
		return nil, err
	case <-t.C:
		return ch, nil
	}
}

// abandon gives up a wedged producer: the loop calls into it no more, a
// reaper closes it when its call returns, and the wedge is counted
// against the bound.
func (l *Loop) abandon(h *handle, op string, done <-chan error) {
	h.abandoned.Store(true)
	if l.producer == h {
		l.producer = nil
	}
	if op == opInit {
		// Should the call still get through, it bumps the epoch and
		// fences the producer that replaces this one (see selfFenced).
		l.lateInit = time.Now()
	}
	open := l.wedgedOpen.Add(1)
	l.obs.Alive() // a wedge found is the watchdog working, not the loop stuck
	l.obs.Wedged(op)
	l.obs.Abandoned(1)
	msg := "librdkafka call wedged past its timeout; abandoning the producer for a new one with the same transactional id, and rewinding to the committed offsets"
	if op == opClose {
		msg = "librdkafka call wedged past its timeout; leaving the producer to close when its call returns"
	}
	l.log.Error(msg, "op", op, "after", l.set.WedgeAfter.String(), "wedged_open", open,
		"librdkafka_issues", "confluentinc/librdkafka#5456, #5511")
	l.reapers.Add(1)
	go l.reap(h, op, done)
	if !l.mayWedge() && l.fatal == nil {
		l.fatal = fmt.Errorf("%w: %s: %d librdkafka calls wedged within %s (or as many wedged producers still open), giving up so that relay is restarted: %w",
			ErrFatal, op, maxWedges+1, wedgeWindow, &WedgedError{Call: op, After: l.set.WedgeAfter})
	}
}

// reap closes a wedged producer once its call has returned. It runs on a
// goroutine of its own, which close waits for (within a bound).
func (l *Loop) reap(h *handle, op string, done <-chan error) {
	defer l.reapers.Done()
	start := time.Now()
	err := <-done
	if op != opClose {
		_ = h.Purge(kafka.PurgeQueue | kafka.PurgeInFlight | kafka.PurgeNonBlocking)
		h.Close()
	}
	<-h.drained
	l.wedgedOpen.Add(-1)
	l.obs.Abandoned(-1)
	l.log.Info("wedged producer closed: its call returned", "op", op, "returned_after", (l.set.WedgeAfter + time.Since(start)).String(), "err", err)
}

// mayWedge reports whether the wedge just counted fits the bound.
func (l *Loop) mayWedge() bool {
	now := time.Now()
	l.wedges = append(recent(l.wedges, now, wedgeWindow), now)
	return len(l.wedges) <= maxWedges && l.wedgedOpen.Load() <= maxWedges
}

// onWedged goes on after a wedged producer call: as after an unknown
// outcome, with a new producer and a rewind, unless the wedge was past
// the bound.
func (l *Loop) onWedged(ctx context.Context, op string) {
	if l.fatal != nil {
		return
	}
	l.reinit(ctx, op+" (wedged)")
}

// isWedged reports whether err is the watchdog's.
func isWedged(err error) bool {
	var w *WedgedError
	return errors.As(err, &w) || errors.Is(err, errAbandoned)
}

// consumerCall makes call, a blocking call into the consumer, under the
// watchdog. A consumer cannot be swapped for another without leaving the
// group, so a wedged call stops relay (ErrFatal), for an orchestrator to
// restart it; close then leaves the consumer alone (detached).
func (l *Loop) consumerCall(op string, bound time.Duration, call func() error) error {
	done, err := within(bound, call)
	if done == nil {
		return err
	}
	// The call may still serve a revoke on its goroutine later: the
	// rebalance callback must not touch the loop's state then.
	l.detached.Store(true)
	l.obs.Wedged("consumer " + op)
	w := &WedgedError{Call: "consumer " + op, After: bound}
	l.log.Error("librdkafka consumer call wedged past its timeout; relay stops so that it is restarted",
		"op", op, "after", bound.String())
	return fmt.Errorf("%w: %w", ErrFatal, w)
}

// reaperWait bounds close's wait for the wedged producers.
const reaperWait = time.Second

// waitReapers waits, at most d, for the wedged producers to be closed.
func (l *Loop) waitReapers(d time.Duration) {
	if l.wedgedOpen.Load() == 0 {
		l.reapers.Wait()
		return
	}
	done := make(chan struct{})
	go func() { l.reapers.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		l.log.Warn("wedged producers still not closed at exit: their calls never returned", "open", l.wedgedOpen.Load())
	}
}

// Calls the watchdog treats apart: a producer whose Close wedged is not
// closed again; an InitTransactions that wedged may fence the next
// producer when it returns.
const (
	opClose = "close"
	opInit  = "init transactions"
)

// selfFenced reports whether a fence may be this instance's own doing: an
// InitTransactions abandoned within the recovery window may have got
// through late and bumped the epoch past the producer that replaced it.
// It holds for one fence only.
func (l *Loop) selfFenced() bool {
	if l.lateInit.IsZero() || time.Since(l.lateInit) > recoveryWindow {
		return false
	}
	l.lateInit = time.Time{}
	return true
}

// ClientsLeft reports whether Run returned with a librdkafka client still
// running: an abandoned producer whose call never returned, or a consumer
// whose call wedged. Their log lines may still come, so the caller must
// keep the clients' log channel open.
func (l *Loop) ClientsLeft() bool { return l.wedgedOpen.Load() > 0 || l.detached.Load() }
