package txn

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// batchHandler is a BatchHandler whose HandleBatch is the test's.
type batchHandler struct {
	t       *testing.T
	size    int
	handle  func(recs []*Record, b Batch)
	batches [][]int64 // partition*100+offset of each batch's records
}

func (h *batchHandler) Handle(context.Context, *Record) ([]Output, error) {
	h.t.Fatal("Handle called on a batch handler")
	return nil, nil
}

func (h *batchHandler) BatchSize() int { return h.size }

func (h *batchHandler) HandleBatch(_ context.Context, recs []*Record, b Batch) {
	var ids []int64
	for _, r := range recs {
		ids = append(ids, int64(r.Partition)*100+r.Offset)
	}
	h.batches = append(h.batches, ids)
	h.handle(recs, b)
}

// Scripts end their batches with sleepEvent(0): a Poll that returns
// nothing without ending the script, whose end stops the loop (and makes
// Start refuse the rest of a batch).

// firstBatchOnly runs f for the first batch; later batches (the records
// fetched again) are left alone.
func firstBatchOnly(f func(recs []*Record, b Batch)) func(recs []*Record, b Batch) {
	done := false
	return func(recs []*Record, b Batch) {
		if !done {
			done = true
			f(recs, b)
		}
	}
}

func out(r *Record) []Output { return []Output{{Topic: "out", Partition: r.Partition, Value: r.Value}} }

// TestBatchHandlerFailureRewindsRecordsNeverStarted: a handler error on
// the first record of a batch aborts; the rewind seeks back every
// partition the batch held, also the one whose record was never started
// (librdkafka's position is past it: without the seek the next commit
// would skip it).
func TestBatchHandlerFailureRewindsRecordsNeverStarted(t *testing.T) {
	h := newHarness(t)
	bh := &batchHandler{t: t, size: 10}
	failed := false
	bh.handle = func(recs []*Record, b Batch) {
		if !failed {
			failed = true
			b.Start(0)
			b.Done(0, nil, errors.New("cannot decide"))
			return
		}
		for i, r := range recs {
			if b.Start(i) {
				b.Done(i, out(r), nil)
			}
		}
	}
	h.handler = bh
	c := h.c
	c.committed[0], c.committed[1] = 0, 0
	if err := h.run(c.assign(0, 1), c.msg(0, 0), c.msg(1, 0), sleepEvent(0)); err != nil {
		t.Fatal(err)
	}
	if h.prods[0].abortedTxns != 1 {
		t.Fatalf("aborted %d, want 1", h.prods[0].abortedTxns)
	}
	if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{0: 0, 1: 0}) {
		t.Errorf("seeks %v, want partitions 0 and 1 back to 0", got)
	}
}

// TestBatchResultsInAnyOrderCommitPastTheLast: results of one partition
// given out of order still commit the offset after the furthest.
func TestBatchResultsInAnyOrderCommitPastTheLast(t *testing.T) {
	h := newHarness(t)
	bh := &batchHandler{t: t, size: 10, handle: func(recs []*Record, b Batch) {
		for i := range recs {
			b.Start(i)
		}
		for i := len(recs) - 1; i >= 0; i-- {
			b.Done(i, out(recs[i]), nil)
		}
	}}
	h.handler = bh
	c := h.c
	if err := h.run(c.assign(0), c.msg(0, 4), c.msg(0, 5), c.msg(0, 6), sleepEvent(0)); err != nil {
		t.Fatal(err)
	}
	p := h.prods[0]
	if len(bh.batches) != 1 || len(bh.batches[0]) != 3 {
		t.Fatalf("batches %v, want one of three", bh.batches)
	}
	if len(p.sentOffsets) != 1 || offsetsOf(p.sentOffsets[0])[0] != 7 || len(p.produced) != 3 {
		t.Fatalf("committed %v with %d outputs, want offset 7 with 3", p.sentOffsets, len(p.produced))
	}
}

// TestBatchGapAborts: a record applied past one of its partition that was
// not (here: not due) would be skipped by the commit: the loop aborts
// instead, and nothing of the batch commits.
func TestBatchGapAborts(t *testing.T) {
	h := newHarness(t)
	bh := &batchHandler{t: t, size: 10, handle: firstBatchOnly(func(recs []*Record, b Batch) {
		b.Start(0)
		b.Start(1)
		b.Done(1, out(recs[1]), nil)
		b.Done(0, nil, &NotDueError{Until: time.Now().Add(time.Hour)})
	})}
	h.handler = bh
	c := h.c
	c.committed[0] = 4
	if err := h.run(c.assign(0), c.msg(0, 4), c.msg(0, 5), sleepEvent(0)); err != nil {
		t.Fatal(err)
	}
	p := h.prods[0]
	if p.abortedTxns != 1 || p.committedTxns != 0 {
		t.Fatalf("aborted %d committed %d, want the batch aborted", p.abortedTxns, p.committedTxns)
	}
	if !slices.Contains(h.obs.reasons, "batch") {
		t.Errorf("abort reasons %v, want batch", h.obs.reasons)
	}
}

// TestBatchDropsWhatWasPolledBeforeARebalance: a rebalance while a batch
// is polled (relay's eager assignor revokes everything, and positions
// restart from the committed offsets): each record is handled once, from
// where the rebalance left it. (pollBatch stops at the revoke, so what it
// polled before is also dropped as stale; its own drop is for a client
// that would serve more than one rebalance event in one Poll.)
func TestBatchDropsWhatWasPolledBeforeARebalance(t *testing.T) {
	h := newHarness(t)
	var handled []int64
	bh := &batchHandler{t: t, size: 10, handle: func(recs []*Record, b Batch) {
		for i, r := range recs {
			if b.Start(i) {
				handled = append(handled, r.Offset)
				b.Done(i, out(r), nil)
			}
		}
	}}
	h.handler = bh
	c := h.c
	// librdkafka fetches offset 0 again after the assignment.
	if err := h.run(c.assign(0), c.msg(0, 0), c.revoke(0), c.assign(0), c.msg(0, 0), c.msg(0, 1), sleepEvent(0)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(handled, []int64{0, 1}) {
		t.Fatalf("handled %v, want [0 1]", handled)
	}
}

// TestBatchNotDueStopsItsPartitionOnly: a record not due pauses its
// partition and seeks back to it; the loop refuses the records behind it
// and takes another partition's.
func TestBatchNotDueStopsItsPartitionOnly(t *testing.T) {
	h := newHarness(t)
	var refused []int
	bh := &batchHandler{t: t, size: 10, handle: func(recs []*Record, b Batch) {
		for i, r := range recs {
			if !b.Start(i) {
				refused = append(refused, i)
				continue
			}
			if r.Partition == 0 && r.Offset == 6 {
				b.Done(i, nil, &NotDueError{Until: time.Now().Add(time.Hour)})
				continue
			}
			b.Done(i, out(r), nil)
		}
	}}
	h.handler = bh
	c := h.c
	if err := h.run(c.assign(0, 1), c.msg(0, 5), c.msg(0, 6), c.msg(0, 7), c.msg(1, 3), sleepEvent(0)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(refused, []int{2}) {
		t.Errorf("refused %v, want [2] (offset 7, behind the record not due)", refused)
	}
	p := h.prods[0]
	if got := offsetsOf(p.sentOffsets[0]); got[0] != 6 || got[1] != 4 {
		t.Fatalf("committed %v, want partition 0 at 6 and 1 at 4", got)
	}
	if len(c.seeks) != 1 || c.seeks[0].Offset != 6 {
		t.Fatalf("seeks %v, want one to offset 6", c.seeks)
	}
}

// TestBatchRecordBeforeOneNotDueIsApplied: in a tier partition, a due
// record's result may come after the result of the record behind it that
// is not due: it is still applied, and the transaction commits up to the
// one not due.
func TestBatchRecordBeforeOneNotDueIsApplied(t *testing.T) {
	h := newHarness(t)
	bh := &batchHandler{t: t, size: 10, handle: firstBatchOnly(func(recs []*Record, b Batch) {
		b.Start(0)
		b.Start(1)
		b.Done(1, nil, &NotDueError{Until: time.Now().Add(time.Hour)})
		if !b.Done(0, out(recs[0]), nil) {
			t.Error("the due record's result was refused")
		}
	})}
	h.handler = bh
	c := h.c
	if err := h.run(c.assign(0), c.msg(0, 10), c.msg(0, 11), sleepEvent(0)); err != nil {
		t.Fatal(err)
	}
	p := h.prods[0]
	if p.abortedTxns != 0 || len(p.sentOffsets) != 1 || offsetsOf(p.sentOffsets[0])[0] != 11 {
		t.Fatalf("aborted %d, committed %v; want no abort and partition 0 at 11", p.abortedTxns, p.sentOffsets)
	}
}

// TestBatchDefersWhatComesAfterTheTransactionIsDue: once the transaction
// is due, the loop refuses the rest of the batch and seeks each partition
// back to its first refused record; what was applied commits.
func TestBatchDefersWhatComesAfterTheTransactionIsDue(t *testing.T) {
	h := newHarness(t)
	h.set.CommitInterval = 20 * time.Millisecond
	first := true
	var handled []int64
	bh := &batchHandler{t: t, size: 10, handle: func(recs []*Record, b Batch) {
		for i, r := range recs {
			if first && i == 1 {
				time.Sleep(30 * time.Millisecond) // the transaction is due now
			}
			if !b.Start(i) {
				continue
			}
			handled = append(handled, int64(r.Partition)*100+r.Offset)
			b.Done(i, out(r), nil)
		}
		first = false
	}}
	h.handler = bh
	c := h.c
	if err := h.run(c.assign(0, 1), c.msg(0, 0), c.msg(0, 1), c.msg(1, 0), sleepEvent(0)); err != nil {
		t.Fatal(err)
	}
	p := h.prods[0]
	if len(p.sentOffsets) == 0 || offsetsOf(p.sentOffsets[0])[0] != 1 || len(p.sentOffsets[0]) != 1 {
		t.Fatalf("first commit %v, want only partition 0 at 1", p.sentOffsets)
	}
	if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{0: 1, 1: 0}) {
		t.Errorf("seeks %v, want partition 0 back to 1 and 1 back to 0", got)
	}
	if !slices.Equal(handled, []int64{0}) {
		t.Errorf("handled %v, want [0]", handled)
	}
}

// TestBatchRecordsNeverAskedAreSoughtBack: records the handler never asked
// to start (it stopped early) are fetched again: their partitions are
// sought back to the first of them, and the commit does not pass it.
func TestBatchRecordsNeverAskedAreSoughtBack(t *testing.T) {
	h := newHarness(t)
	first := true
	bh := &batchHandler{t: t, size: 10, handle: func(recs []*Record, b Batch) {
		n := len(recs)
		if first {
			n, first = 1, false
		}
		for i := range n {
			if b.Start(i) {
				b.Done(i, out(recs[i]), nil)
			}
		}
	}}
	h.handler = bh
	c := h.c
	if err := h.run(c.assign(0, 1), c.msg(0, 0), c.msg(0, 1), c.msg(1, 0), sleepEvent(0)); err != nil {
		t.Fatal(err)
	}
	if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{0: 1, 1: 0}) {
		t.Errorf("seeks %v, want partition 0 back to 1 and 1 back to 0", got)
	}
	p := h.prods[0]
	if len(p.sentOffsets) != 1 || !mapsEqual(offsetsOf(p.sentOffsets[0]), map[int32]int64{0: 1}) {
		t.Errorf("committed %v, want only partition 0 at 1", p.sentOffsets)
	}
}

// TestBatchSizeAdapts: a batch that defers records because its
// transaction was due makes the next one half as large (down to a floor);
// full batches that defer nothing make the next larger again.
func TestBatchSizeAdapts(t *testing.T) {
	h := newHarness(t)
	h.set.CommitInterval = 10 * time.Millisecond
	slow := 3
	bh := &batchHandler{t: t, size: 64}
	bh.handle = func(recs []*Record, b Batch) {
		for i, r := range recs {
			if i == 1 && slow > 0 {
				time.Sleep(15 * time.Millisecond) // the transaction is due
			}
			if b.Start(i) {
				b.Done(i, out(r), nil)
			}
		}
		slow--
	}
	h.handler = bh
	c := h.c
	script := []kafka.Event{c.assign(0)}
	for i := range 400 {
		script = append(script, c.msg(0, int64(i)))
	}
	if err := h.run(append(script, sleepEvent(0))...); err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, b := range bh.batches {
		sizes = append(sizes, len(b))
	}
	if len(sizes) < 5 || !slices.Equal(sizes[:5], []int{64, 32, 16, 16, 20}) {
		t.Fatalf("batch sizes %v, want 64 32 16 (slow) then 16 20 ... (fast)", sizes)
	}
}

// closingConsumer serves a revoke from Close, as confluent-kafka-go's
// Consumer.Close does (it polls until closed, and the rebalance callback
// runs).
type closingConsumer struct{ *fakeConsumer }

func (c closingConsumer) Close() error {
	_ = c.cb(nil, c.revoke(0))
	return c.fakeConsumer.Close()
}

// TestBatchPanicDoesNotCommit: a panic in the middle of a batch (offset
// 5 applied, offset 4 never) unwinds through the consumer's close, which
// serves a revoke; the revoke must not commit the open transaction, which
// would put the offset past a record that never reached a state.
func TestBatchPanicDoesNotCommit(t *testing.T) {
	h := newHarness(t)
	h.handler = &batchHandler{t: t, size: 10, handle: func(recs []*Record, b Batch) {
		b.Start(0)
		b.Start(1)
		b.Done(1, out(recs[1]), nil)
		panic("a try panicked")
	}}
	c := h.c
	c.script = []kafka.Event{c.assign(0), c.msg(0, 4), c.msg(0, 5)}
	func() {
		defer func() {
			if v := recover(); v != "a try panicked" {
				t.Errorf("recovered %v, want the handler's panic", v)
			}
		}()
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		_ = New(h.set, closingConsumer{c}, func() (Producer, error) { return h.prods[0], nil }, h.handler, log, h.obs).Run(t.Context())
	}()
	if p := h.prods[0]; p.committedTxns != 0 || len(p.sentOffsets) != 0 {
		t.Fatalf("committed %d transactions, offsets %v, after a panic", p.committedTxns, p.sentOffsets)
	}
}
