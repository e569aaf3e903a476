package txn

import (
	"testing"
	"time"
)

// TestBackoffBounds: each wait lies in the upper half of its step, the
// steps double from base, and no wait passes limit.
func TestBackoffBounds(t *testing.T) {
	const base, limit = 100 * time.Millisecond, 5 * time.Second
	for range 200 {
		b := newBackoff(base, limit)
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
