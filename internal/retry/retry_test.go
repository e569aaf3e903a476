package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// TestScheduleBounds: each wait lies in the upper half of its step, the
// steps double from base, and no wait passes limit.
func TestScheduleBounds(t *testing.T) {
	const base, limit = 100 * time.Millisecond, 5 * time.Second
	for range 200 {
		b := Schedule(base, limit)
		step := base
		for range 12 {
			d := b.NextBackOff()
			if d < step/2 || d > step+time.Nanosecond {
				t.Fatalf("wait %s outside [%s, %s]", d, step/2, step)
			}
			step = min(2*step, limit)
		}
		b.Reset()
		if d := b.NextBackOff(); d < base/2 || d > base+time.Nanosecond {
			t.Fatalf("after reset, wait %s outside [%s, %s]", d, base/2, base)
		}
	}
}

// Do waits a doubling, jittered interval between failures, tells each
// failure and its wait, and stops at once on a permanent error.
func TestDoBacksOffAndStopsOnPermanent(t *testing.T) {
	calls := 0
	var waits []time.Duration
	op := func() (int, error) {
		calls++
		switch calls {
		case 1, 2, 3:
			return 0, errors.New("not yet")
		case 4:
			return 0, backoff.Permanent(errors.New("never"))
		}
		return calls, nil
	}
	_, err := Do(context.Background(), op, 2*time.Millisecond, 4*time.Millisecond, func(_ error, in time.Duration) { waits = append(waits, in) })
	if err == nil || err.Error() != "never" || calls != 4 {
		t.Fatalf("%v after %d calls; want the permanent error, unmarked, after 4", err, calls)
	}
	if len(waits) != 3 {
		t.Fatalf("waits %v, want one per failure before the permanent one", waits)
	}
	for i, most := range []time.Duration{2, 4, 4} { // the first step 2 ms, then 4 ms, capped at 4 ms
		if waits[i] > most*time.Millisecond {
			t.Errorf("wait %d is %s, above %d ms", i, waits[i], most)
		}
	}
}
