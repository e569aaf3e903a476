package telemetry

import (
	"fmt"
	"time"
)

// Alive implements txn.Observer: the loop made progress now.
func (m *Metrics) Alive() { m.alive.Store(m.now().UnixNano()) }

// SetLivenessBound sets how long the loop may go without progress before
// /livez calls it stuck. The daemon derives it from the longest call the
// loop makes without going round (see daemon.livenessBound).
func (m *Metrics) SetLivenessBound(d time.Duration) { m.liveBound.Store(int64(d)) }

// Started says the loop has gone round at least once.
func (m *Metrics) Started() bool { return m.alive.Load() != 0 }

// stuck says why the loop counts as stuck, or "" while it is live: it has
// made no progress for longer than the bound. Before the loop first goes
// round (start-up checks, waiting for a broker or the registry) and
// without a bound, nothing is stuck.
func (m *Metrics) stuck() string {
	last, bound := m.alive.Load(), time.Duration(m.liveBound.Load())
	if last == 0 || bound <= 0 {
		return ""
	}
	if since := m.now().Sub(time.Unix(0, last)); since > bound {
		return fmt.Sprintf("the loop made no progress for %s (bound %s)", since.Round(time.Second), bound)
	}
	return ""
}
