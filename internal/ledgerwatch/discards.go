package ledgerwatch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"relay/internal/ledger"
	"relay/internal/pipeline"
)

// discardFreshness is how old a reading of a state partition may be and
// still answer whether a failure was discarded: a discard made more than
// about this long before a replayed record's turn is always seen there.
// It also bounds how long one asked end is waited for before it is asked
// again.
const discardFreshness = time.Second

// discardView is what the ledger watch has read of the discards in the
// state partitions it follows, and how far it has read each. It is the
// machine's pipeline.Discards: relay quarantine discard writes from
// outside, and the owner of a replayed record must see it before the
// record's turn. It is safe for concurrent use: the watch writes, the
// transaction loop asks; the loop never waits for the watch.
type discardView struct {
	mu     sync.Mutex
	next   map[int32]int64           // next offset the watch reads, by state partition it follows
	caught map[int32]bool            // the watch reached the partition's end once: what it reads now is new
	ids    map[int32]map[string]bool // failures with a discard, by state partition
	asked  map[int32]endAsked        // the latest end asked for, until the watch reaches it
	fresh  map[int32]time.Time       // when the latest end the watch reached was asked for
	// end is a partition's last stable offset now: read_committed
	// readers cannot pass it, and every discard committed before the
	// call lies below it, unless it sits behind a transaction still open
	// (relay's own lasts about RELAY_COMMIT_INTERVAL).
	end     func(p int32, timeout time.Duration) (int64, error)
	timeout time.Duration // of one end request, inside a transaction
	now     func() time.Time
}

type endAsked struct {
	offset int64
	at     time.Time
}

func newDiscardView(end func(int32, time.Duration) (int64, error), timeout time.Duration) *discardView {
	return &discardView{next: map[int32]int64{}, caught: map[int32]bool{}, ids: map[int32]map[string]bool{},
		asked: map[int32]endAsked{}, fresh: map[int32]time.Time{}, end: end, timeout: timeout, now: time.Now}
}

// start: the watch reads partitions from their beginning (again).
func (d *discardView) start(parts []int32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range parts {
		d.next[p], d.caught[p], d.ids[p] = 0, false, map[string]bool{}
		delete(d.asked, p)
		delete(d.fresh, p)
	}
}

// stop: the watch no longer reads partitions.
func (d *discardView) stop(parts []int32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range parts {
		delete(d.next, p)
		delete(d.caught, p)
		delete(d.ids, p)
		delete(d.asked, p)
		delete(d.fresh, p)
	}
}

// saw notes the record at offset of partition p, e when it is a ledger
// change. It says whether e is a discard read live, after the watch first
// reached the partition's end: one an operator just made.
func (d *discardView) saw(p int32, offset int64, e *ledger.Event) (live bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.next[p]; !ok {
		return false // a partition the watch no longer follows
	}
	if e != nil && e.State == ledger.Discarded && e.Outcome != ledger.OutcomeDuplicate {
		d.ids[p][e.ID] = true
		live = d.caught[p]
	}
	d.next[p] = max(d.next[p], offset+1)
	return live
}

// reached notes that the watch's position in p is offset (an end it
// reached, or its position while idle: past markers and aborted records).
func (d *discardView) reached(p int32, offset int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.next[p]; ok {
		d.caught[p] = true
		d.next[p] = max(d.next[p], offset)
	}
}

// Discarded implements pipeline.Discards.
func (d *discardView) Discarded(_ context.Context, p int32, id string) (bool, error) {
	if d.has(p, id) {
		return true, nil
	}
	if err := d.read(p); err != nil {
		return false, err
	}
	return d.has(p, id), nil
}

func (d *discardView) has(p int32, id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ids[p][id]
}

// read says whether p has been read up to an end asked for less than
// discardFreshness ago. If not, it asks for the end now (one ListOffsets
// request), unless an ask is still fresh: the watch reaches the end
// within a fetch, and a later question finds it there. Waiting on one end
// rather than asking on every question means a busy partition, whose end
// moves with every commit, is caught up with all the same.
func (d *discardView) read(p int32) error {
	now := d.now()
	d.mu.Lock()
	d.settle(p)
	next, following := d.next[p]
	if at, ok := d.fresh[p]; ok && now.Sub(at) < discardFreshness {
		d.mu.Unlock()
		return nil
	}
	if a, ok := d.asked[p]; ok && now.Sub(a.at) < discardFreshness {
		d.mu.Unlock()
		return fmt.Errorf("%w: state partition %d read to %d of %d", pipeline.ErrNotRead, p, next, a.offset)
	}
	d.mu.Unlock()
	if !following {
		return fmt.Errorf("the ledger reader does not follow state partition %d", p)
	}
	end, err := d.end(p, d.timeout)
	if err != nil {
		return fmt.Errorf("end of state partition %d: %w", p, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.next[p]; !ok {
		return fmt.Errorf("the ledger reader stopped following state partition %d", p)
	}
	d.asked[p] = endAsked{offset: end, at: now}
	if d.settle(p); d.fresh[p].Equal(now) {
		return nil
	}
	return fmt.Errorf("%w: state partition %d read to %d of %d", pipeline.ErrNotRead, p, d.next[p], end)
}

// settle turns an asked end the watch has reached into freshness.
func (d *discardView) settle(p int32) {
	if a, ok := d.asked[p]; ok && d.next[p] >= a.offset {
		if _, following := d.next[p]; following {
			d.fresh[p] = a.at
			delete(d.asked, p)
		}
	}
}
