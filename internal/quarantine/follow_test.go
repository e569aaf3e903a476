package quarantine

import (
	"runtime/debug"
	"testing"
)

// A catch-up lowers the collector's target to catchUpGC, never raises a
// lower one, and restores it after.
func TestLowerGC(t *testing.T) {
	gcPercent := func() int {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, c := range []struct{ gogc, during int }{{100, catchUpGC}, {catchUpGC - 5, catchUpGC - 5}, {-1, catchUpGC}} {
		debug.SetGCPercent(c.gogc)
		restore := lowerGC()
		during := gcPercent()
		restore()
		if after := gcPercent(); during != c.during || after != c.gogc {
			t.Errorf("GOGC %d: %d during a catch-up, %d after", c.gogc, during, after)
		}
	}
}
