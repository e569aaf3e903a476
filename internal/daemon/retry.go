package daemon

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// retry calls op until it succeeds, returns an error marked
// backoff.Permanent (returned unmarked), or ctx ends (its error is
// returned). Between calls it waits initial at first, doubling up to most,
// each wait jittered by half so that instances started together do not
// ask together; notify hears each failure and the wait, to the
// millisecond, before the wait.
func retry[T any](ctx context.Context, op backoff.Operation[T], initial, most time.Duration, notify backoff.Notify) (T, error) {
	return backoff.Retry(ctx, op, backoff.WithMaxElapsedTime(0),
		backoff.WithBackOff(&backoff.ExponentialBackOff{
			InitialInterval: initial, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: most,
		}),
		backoff.WithNotify(func(err error, in time.Duration) { notify(err, in.Round(time.Millisecond)) }))
}
