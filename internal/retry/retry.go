// Package retry is relay's one wait-and-retry schedule, on
// github.com/cenkalti/backoff/v5: exponential from a first step up to a
// limit, each wait drawn from the upper half of its step, so instances
// restarted together (or partitions stalled together) do not retry in
// lockstep, and no wait is longer than the limit.
package retry

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Schedule is the schedule from first up to limit. The library draws a
// wait from interval × (1 ± factor): three quarters of a step with a
// factor of a third is the step's upper half, [step/2, step].
func Schedule(first, limit time.Duration) *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval:     first * 3 / 4,
		RandomizationFactor: 1.0 / 3,
		Multiplier:          2,
		MaxInterval:         limit * 3 / 4,
	}
}

// Do calls op until it succeeds, returns an error marked
// backoff.Permanent (returned unmarked), or ctx ends (its error is
// returned), waiting by Schedule(first, limit) between calls, with no
// bound on the total time. notify, when set, hears each failure and the
// wait that follows it, to the millisecond.
func Do[T any](ctx context.Context, op backoff.Operation[T], first, limit time.Duration, notify func(err error, wait time.Duration)) (T, error) {
	opts := []backoff.RetryOption{backoff.WithMaxElapsedTime(0), backoff.WithBackOff(Schedule(first, limit))}
	if notify != nil {
		opts = append(opts, backoff.WithNotify(func(err error, in time.Duration) { notify(err, in.Round(time.Millisecond)) }))
	}
	return backoff.Retry(ctx, op, opts...)
}
