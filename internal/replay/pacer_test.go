package replay

import (
	"testing"
	"time"
)

// The rate is a ceiling: after a long stall (a slow commit) one batch
// goes at once, then the rest at the rate, never the backlog back to back.
func TestPacerIsACeiling(t *testing.T) {
	p := newPacer(100) // batches of 10
	now := time.Unix(1000, 0)
	if w := p.take(now, p.batch); w != 0 {
		t.Fatalf("the first batch waited %s", w)
	}
	now = now.Add(10 * time.Second) // a stall: 1000 records' worth
	sent, start := 0, now
	for sent < 200 {
		if w := p.take(now, p.batch); w > 0 {
			now = now.Add(w)
			continue
		}
		sent += p.batch
	}
	// 200 records at 100/s after one free batch: at least 1.9 s.
	if took := now.Sub(start); took < 1900*time.Millisecond {
		t.Fatalf("200 records after a stall went in %s: a burst", took)
	}
	if w := p.take(now, 1); w <= 0 {
		t.Fatal("tokens left past the ceiling")
	}
}
