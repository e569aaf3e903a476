package quarantine

import (
	"runtime/debug"
	"testing"
)

// gcPercent is the collector's target now.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// A catch-up lowers the collector's target to catchUpGC, never raises a
// lower one, and restores it after.
func TestLowerGC(t *testing.T) {
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

// Catch-ups that overlap keep the target low until the last ends, which
// restores the one from before the first, whatever the order they end in.
func TestLowerGCOverlapping(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, firstEndsFirst := range []bool{true, false} {
		debug.SetGCPercent(100)
		a := lowerGC()
		b := lowerGC()
		if firstEndsFirst {
			a()
		} else {
			b()
		}
		if during := gcPercent(); during != catchUpGC {
			t.Errorf("one of two catch-ups ended (the first %v): GOGC %d, want %d", firstEndsFirst, during, catchUpGC)
		}
		a()
		b()
		if after := gcPercent(); after != 100 {
			t.Errorf("both ended (the first first %v): GOGC %d, want 100", firstEndsFirst, after)
		}
	}
	// A restore called twice counts once.
	a, b := lowerGC(), lowerGC()
	a()
	a()
	if during := gcPercent(); during != catchUpGC {
		t.Errorf("a restore called twice ended the other catch-up: GOGC %d", during)
	}
	b()
	if after := gcPercent(); after != 100 {
		t.Errorf("after both: GOGC %d", after)
	}
}
