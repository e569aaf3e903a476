package txn

import (
	"sync/atomic"
	"time"
)

// freezeWatch tells a process that was frozen (SIGSTOP, a VM paused, a
// starved container) from a loop that is merely busy: it ticks on a
// goroutine of its own, and a frozen process stops every goroutine, so the
// longest gap between its ticks is how long the process was frozen. A slow
// handler or a blocked librdkafka call does not stop it, and does not
// cost the group membership either: librdkafka heartbeats from its own
// thread. A freeze longer than session.timeout.ms does: the group has
// moved on, and a replacement may hold the transactional id (see zombie).
type freezeWatch struct {
	every time.Duration
	last  atomic.Int64 // unix nanos of the last tick (monotonic enough: both from time.Now)
	gap   atomic.Int64 // longest gap between ticks since reset, in nanos
	stop  chan struct{}
	done  chan struct{}
}

func newFreezeWatch(every time.Duration) *freezeWatch {
	w := &freezeWatch{every: every, stop: make(chan struct{}), done: make(chan struct{})}
	w.last.Store(time.Now().UnixNano())
	go w.run()
	return w
}

func (w *freezeWatch) run() {
	defer close(w.done)
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.tick(time.Now())
		}
	}
}

func (w *freezeWatch) tick(now time.Time) {
	n := now.UnixNano()
	if g := n - w.last.Swap(n); g > w.gap.Load() {
		w.gap.Store(g)
	}
}

// reset starts a new measure (a transaction begins).
func (w *freezeWatch) reset() { w.gap.Store(0) }

// frozen is the longest the process was frozen since reset, counting a
// freeze that ended so recently that no tick has seen it yet.
func (w *freezeWatch) frozen(now time.Time) time.Duration {
	since := now.UnixNano() - w.last.Load() - int64(w.every)
	return time.Duration(max(w.gap.Load()-int64(w.every), since, 0))
}

func (w *freezeWatch) close() {
	close(w.stop)
	<-w.done
}
