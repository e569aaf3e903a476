package txn

import (
	"math/rand/v2"
	"time"
)

// backoff is the loop's one wait-and-retry schedule: exponential from base
// up to limit, each wait drawn from its upper half, so instances restarted
// together (or partitions stalled together) do not retry in step.
type backoff struct {
	base, limit time.Duration
	n           int
}

// next is the wait before the next try.
func (b *backoff) next() time.Duration {
	d := b.base << min(b.n, 30)
	if d <= 0 || d > b.limit {
		d = b.limit
	}
	b.n++
	half := d / 2
	return half + rand.N(half+1)
}

// reset starts the schedule again after a success.
func (b *backoff) reset() { b.n = 0 }
