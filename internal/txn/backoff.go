package txn

import (
	"time"

	"github.com/cenkalti/backoff/v5"
)

// newBackoff is the loop's one wait-and-retry schedule: exponential from
// base up to limit, each wait drawn from the upper half of its step, so
// instances restarted together (or partitions stalled together) do not
// retry in step. The library draws a wait from interval × (1 ± factor):
// three quarters of a step with a factor of a third is the step's upper
// half, [step/2, step], so no wait is longer than limit.
func newBackoff(base, limit time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval:     base * 3 / 4,
		RandomizationFactor: 1.0 / 3,
		Multiplier:          2,
		MaxInterval:         limit * 3 / 4,
	}
}
