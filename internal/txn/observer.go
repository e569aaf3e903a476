package txn

import "time"

// Observer receives the loop's events, for metrics and readiness. Calls come
// from the loop's goroutine and must not block.
type Observer interface {
	// Ready reports whether the loop is consuming.
	Ready(bool)
	// Assigned reports how many partitions this instance owns.
	Assigned(partitions int)
	// Consumed reports source records read and handled into the open
	// transaction (a record the handler kept aside and handed back later
	// counts once).
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
	// Wedged reports a librdkafka call (call names it) that did not
	// return within its bound (see watchdog.go).
	Wedged(call string)
	// Abandoned reports a change in the number of abandoned producers
	// still open: +1 when one is abandoned, -1 when its call returned and
	// it was closed. The -1 comes from another goroutine than the loop's.
	Abandoned(delta int)
	// Alive reports that the loop makes progress: it goes round, or it
	// waits between tries of a call through an outage. A liveness probe
	// tells a stuck loop from a waiting one by it. Called often: cheap.
	Alive()
	// Statistics hands on librdkafka's statistics (statistics.interval.ms)
	// of the loop's consumer ("consumer") or producer ("producer"), as
	// the JSON document librdkafka emits. The producer's come from
	// another goroutine than the loop's.
	Statistics(client, json string)
}

// NopObserver ignores every event.
type NopObserver struct{}

func (NopObserver) Ready(bool)                        {}
func (NopObserver) Assigned(int)                      {}
func (NopObserver) Consumed(int)                      {}
func (NopObserver) Committed(int, int, time.Duration) {}
func (NopObserver) Aborted(string)                    {}
func (NopObserver) Stalled(int)                       {}
func (NopObserver) Wedged(string)                     {}
func (NopObserver) Abandoned(int)                     {}
func (NopObserver) Alive()                            {}
func (NopObserver) Statistics(string, string)         {}

// The clients Observer.Statistics names.
const (
	kindConsumer = "consumer"
	kindProducer = "producer"
)
