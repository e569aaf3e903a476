package ledgerwatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"relay/internal/ledger"
	"relay/internal/pipeline"
)

func discardOf(id string) *ledger.Event {
	return &ledger.Event{ID: id, State: ledger.Discarded, ReplayCount: 1, Source: ledger.Source{Topic: "orders", Partition: 2}}
}

// fixedEnd is a state partition's end as the broker tells it, counting
// requests.
type fixedEnd struct {
	offset int64
	err    error
	asked  int
}

func (f *fixedEnd) end(int32, time.Duration) (int64, error) {
	f.asked++
	return f.offset, f.err
}

// A question is answered only from a reading up to an end asked for less
// than discardFreshness before: a discard committed before that is never
// missed for the watch's lag. Until the watch is there, the answer is
// ErrNotRead, and the end is not asked again meanwhile (a busy partition's
// end moves with every commit).
func TestDiscardViewAnswersFromAFreshEnd(t *testing.T) {
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	e := &fixedEnd{offset: 10}
	d := newDiscardView(e.end, time.Second)
	d.now = func() time.Time { return at }
	ctx := context.Background()
	d.start([]int32{2})
	d.saw(2, 3, nil)
	if _, err := d.Discarded(ctx, 2, "orders/2/7"); !errors.Is(err, pipeline.ErrNotRead) || e.asked != 1 {
		t.Fatalf("%v after %d requests; want not read yet", err, e.asked)
	}
	d.saw(2, 8, discardOf("orders/2/7")) // the watch reads on
	at = at.Add(100 * time.Millisecond)
	if _, err := d.Discarded(ctx, 2, "orders/2/5"); !errors.Is(err, pipeline.ErrNotRead) || e.asked != 1 {
		t.Fatalf("%v after %d requests; want not read yet, and no new request", err, e.asked)
	}
	d.reached(2, 10) // past the commit marker
	if gone, err := d.Discarded(ctx, 2, "orders/2/5"); err != nil || gone || e.asked != 1 {
		t.Fatalf("%v %v after %d requests; want a fresh no", gone, err, e.asked)
	}
	if gone, _ := d.Discarded(ctx, 2, "orders/2/7"); !gone {
		t.Fatal("a discard read is a yes")
	}
	at = at.Add(discardFreshness)
	e.offset = 12
	if _, err := d.Discarded(ctx, 2, "orders/2/5"); !errors.Is(err, pipeline.ErrNotRead) || e.asked != 2 {
		t.Fatalf("%v after %d requests; a stale reading must ask again", err, e.asked)
	}
	d.reached(2, 12)
	e.offset = 12
	at = at.Add(discardFreshness) // the ask went stale too: asked again, reached at once
	if gone, err := d.Discarded(ctx, 2, "orders/2/5"); err != nil || gone || e.asked != 3 {
		t.Fatalf("%v %v after %d requests", gone, err, e.asked)
	}
}

// A partition the watch does not follow, or an end the broker does not
// tell, is an error other than ErrNotRead: the record waits longer and
// relay says why.
func TestDiscardViewCannotTell(t *testing.T) {
	e := &fixedEnd{offset: 10}
	d := newDiscardView(e.end, time.Second)
	if _, err := d.Discarded(context.Background(), 2, "orders/2/7"); err == nil || errors.Is(err, pipeline.ErrNotRead) || e.asked != 0 {
		t.Fatalf("not followed: %v", err)
	}
	d.start([]int32{2})
	e.err = errors.New("timed out")
	if _, err := d.Discarded(context.Background(), 2, "orders/2/7"); err == nil || errors.Is(err, pipeline.ErrNotRead) {
		t.Fatalf("no end: %v", err)
	}
}

// Discards read before the watch first reached the end are history; later
// ones are live. A partition read again starts over; one no longer
// followed ignores late records.
func TestDiscardViewLiveAndRestart(t *testing.T) {
	d := newDiscardView((&fixedEnd{}).end, time.Second)
	d.start([]int32{2})
	if d.saw(2, 0, discardOf("orders/2/1")) {
		t.Fatal("a discard read while catching up is not live")
	}
	d.reached(2, 1)
	if d.saw(2, 1, &ledger.Event{ID: "orders/2/2", State: ledger.Discarded, Outcome: ledger.OutcomeDuplicate}) || d.has(2, "orders/2/2") {
		t.Fatal("a duplicate note is not a discard")
	}
	if !d.saw(2, 2, discardOf("orders/2/3")) {
		t.Fatal("a discard read after the end is live")
	}
	d.start([]int32{2})
	if d.has(2, "orders/2/1") {
		t.Fatal("read again from the start: what was read before is forgotten")
	}
	if _, err := d.Discarded(context.Background(), 2, "orders/2/9"); err != nil {
		t.Fatalf("an empty partition is read to its end at once: %v", err)
	}
	d.stop([]int32{2})
	d.saw(2, 5, discardOf("orders/2/4"))
	if d.has(2, "orders/2/4") {
		t.Fatal("a partition no longer followed must not collect discards")
	}
}
