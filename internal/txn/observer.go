package txn

import "time"

// Observer receives the loop's events, for metrics and readiness. Calls come
// from the loop's goroutine and must not block.
type Observer interface {
	// Ready reports whether the loop is consuming.
	Ready(bool)
	// Assigned reports how many partitions this instance owns.
	Assigned(partitions int)
	// Consumed reports source records handled into the open transaction.
	Consumed(records int)
	// Committed reports a committed transaction: its source records, its
	// outputs, and how long its commit (send offsets + commit) took.
	Committed(records, outputs int, latency time.Duration)
	// Aborted reports an ended transaction whose records will be handled
	// again, with why.
	Aborted(why string)
	// Stalled reports how many source partitions are held back because
	// their records cannot be written (see stall.go).
	Stalled(partitions int)
	// Alive reports that the loop makes progress: it goes round, or it
	// waits between tries of a call through an outage. A liveness probe
	// tells a stuck loop from a waiting one by it. Called often: cheap.
	Alive()
}

// NopObserver ignores every event.
type NopObserver struct{}

func (NopObserver) Ready(bool)                        {}
func (NopObserver) Assigned(int)                      {}
func (NopObserver) Consumed(int)                      {}
func (NopObserver) Committed(int, int, time.Duration) {}
func (NopObserver) Aborted(string)                    {}
func (NopObserver) Stalled(int)                       {}
func (NopObserver) Alive()                            {}
