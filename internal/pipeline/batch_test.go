package pipeline

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"relay/internal/envelope"
	"relay/internal/hook"
	"relay/internal/schema"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// plainAdmitter admits every value; it is safe for concurrent use.
type plainAdmitter struct{}

func (plainAdmitter) Admit(_ context.Context, v []byte) (schema.Admitted, error) {
	return schema.Admitted{Writer: schema.Info{ID: 11, Subject: "orders-value", Version: 2}, Record: map[string]any{"v": string(v)}, Value: v}, nil
}

func (plainAdmitter) Encode(map[string]any) ([]byte, error) { return []byte("enc"), nil }

// watchHook answers after a random pause; a record fails (unavailable)
// when fail says so for its id. It records, per key, the ids in the order
// they were called, the most calls it saw at once, and any two calls of
// one key at once.
type watchHook struct {
	fail    func(id string) bool
	pause   time.Duration
	mu      sync.Mutex
	rng     *rand.Rand
	now     int
	most    int
	busy    map[string]bool
	overlap []string
	byKey   map[string][]string
}

func newWatchHook(fail func(string) bool, pause time.Duration) *watchHook {
	return &watchHook{fail: fail, pause: pause, rng: rand.New(rand.NewPCG(1, 2)), busy: map[string]bool{}, byKey: map[string][]string{}}
}

func (h *watchHook) Call(ctx context.Context, r *hook.Request) (map[string]any, error) {
	key := fmt.Sprintf("%d|%s", r.Partition, *r.Key) // key ordering is per partition
	h.mu.Lock()
	h.now++
	h.most = max(h.most, h.now)
	if h.busy[key] {
		h.overlap = append(h.overlap, r.MessageID)
	}
	h.busy[key] = true
	h.byKey[key] = append(h.byKey[key], r.MessageID)
	d := time.Duration(h.rng.Int64N(int64(h.pause) + 1))
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.now--
		h.busy[key] = false
		h.mu.Unlock()
	}()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if h.fail(r.MessageID) {
		return nil, tiers.Failf(tiers.CauseHookUnavailable, "hook answered 503")
	}
	return nil, nil
}

// collect is a txn.Batch that starts every record and keeps each result.
type collect struct {
	started []int
	outs    map[int][]txn.Output
	errs    map[int]error
}

func newCollect() *collect {
	return &collect{outs: map[int][]txn.Output{}, errs: map[int]error{}}
}

func (c *collect) Start(i int) bool {
	c.started = append(c.started, i)
	return true
}

func (c *collect) Done(i int, outs []txn.Output, err error) bool {
	c.outs[i], c.errs[i] = outs, err
	return true
}

func batchMachine(t testing.TB, h Hook, concurrency int) *Machine {
	t.Helper()
	m, err := New(Options{
		Table: NewTable([]Routes{{Source: "orders", Output: "orders.valid", Quarantine: "orders.quarantine", Rejected: "orders.rejected",
			Tiers: []string{"orders.retry.30s", "orders.retry.5m"}}}),
		Group:    "relay",
		Policy:   tiers.Policy{Tiers: []time.Duration{30 * time.Second, 5 * time.Minute}, MaxAttempts: 5, MaxElapsed: time.Hour, UnknownAttempts: 2},
		Admitter: plainAdmitter{}, Hook: h, Concurrency: concurrency, Redactor: envelope.NewRedactor(nil, 256),
		Keys: &KeyOrdering{StateTopic: "_relay.relay.state"}, Now: func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func byHash(pct uint32) func(string) bool {
	return func(id string) bool {
		f := fnv.New32a()
		_, _ = f.Write([]byte(id))
		return f.Sum32()%100 < pct
	}
}

// describe renders outputs without what depends on when they were made.
func describe(outs []txn.Output) []string {
	var d []string
	for _, o := range outs {
		code, _ := envelope.Lookup(o.Headers, envelope.ErrorCode)
		seq, _ := envelope.Lookup(o.Headers, envelope.KeySeq)
		d = append(d, fmt.Sprintf("%s|%s|%s|%s|%s", o.Topic, o.Key, o.Value, code, seq))
	}
	return d
}

// TestBatchDecidesAsOneAtATime: over records of few keys in several
// partitions, a fifth failing at the hook, a batch handled with
// concurrent hook calls gives every record the outputs one-at-a-time
// handling gives it; the hook never sees two calls of one key at once,
// sees each key's records in order, and never more calls at once than
// the concurrency.
func TestBatchDecidesAsOneAtATime(t *testing.T) {
	const n, conc = 400, 8
	var recs []*txn.Record
	for i := range n {
		recs = append(recs, rec("orders", int32(i%3), int64(i), fmt.Sprintf("k%d", i%17)))
	}
	seqHook := newWatchHook(byHash(20), 0)
	seq := batchMachine(t, seqHook, 1)
	want := map[int][]string{}
	for i, r := range recs {
		outs, err := seq.Handle(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = describe(outs)
	}
	bh := newWatchHook(byHash(20), 2*time.Millisecond)
	m := batchMachine(t, bh, conc)
	if m.BatchSize() < 2 {
		t.Fatalf("batch size %d with a hook and concurrency %d", m.BatchSize(), conc)
	}
	c := newCollect()
	for start := 0; start < n; start += 100 {
		part := recs[start : start+100]
		sub := newCollect()
		m.HandleBatch(context.Background(), part, sub)
		for i := range part {
			c.outs[start+i], c.errs[start+i] = sub.outs[i], sub.errs[i]
		}
		m.OnCommit()
	}
	for i := range n {
		if c.errs[i] != nil {
			t.Fatalf("record %d: %v", i, c.errs[i])
		}
		if got := describe(c.outs[i]); !slices.Equal(got, want[i]) {
			t.Errorf("record %d (key %s): batch gave\n%v\none at a time gave\n%v", i, recs[i].Key, got, want[i])
		}
	}
	if len(bh.overlap) > 0 {
		t.Errorf("calls of one key at once: %v", bh.overlap)
	}
	if bh.most > conc || bh.most < 2 {
		t.Errorf("at most %d calls at once, want 2..%d", bh.most, conc)
	}
	for key, ids := range bh.byKey {
		if !slices.Equal(ids, seqHook.byKey[key]) {
			t.Errorf("key %s: hook saw %v, one at a time %v", key, ids, seqHook.byKey[key])
		}
	}
}

// TestBatchStopsAPartitionAtARecordNotDue: a tier record not due yet stops
// its partition: the records behind it in that partition are not handled
// (they come again), while another partition's records are.
func TestBatchStopsAPartitionAtARecordNotDue(t *testing.T) {
	h := newWatchHook(func(string) bool { return false }, 20*time.Millisecond)
	m := batchMachine(t, h, 4)
	tierRec := func(partition int32, offset int64, key string, notBefore time.Time) *txn.Record {
		f := &envelope.Failure{ID: fmt.Sprintf("orders/%d/%d", partition, offset), SourceTopic: "orders", SourcePartition: partition,
			SourceOffset: offset, Attempt: 1, FirstFailedAt: t0, LastFailedAt: t0, NotBefore: notBefore, Class: "transient", Code: "HOOK_UNAVAILABLE"}
		r := rec("orders.retry.30s", partition, offset, key)
		r.Headers = envelope.AppendFailure([]txn.Header{}, f)
		return r
	}
	recs := []*txn.Record{
		tierRec(0, 10, "a", t0.Add(-time.Second)),
		// Not due, and behind the first record's key: it cannot start
		// before that one is settled, and the third, of a free key, must
		// still not pass it.
		tierRec(0, 11, "a", t0.Add(time.Minute)),
		tierRec(0, 12, "c", t0.Add(-time.Second)),
		tierRec(1, 20, "d", t0.Add(-time.Second)),
		tierRec(1, 21, "e", t0.Add(-time.Second)),
	}
	c := newCollect()
	m.HandleBatch(context.Background(), recs, c)
	if _, handled := c.outs[2]; handled {
		t.Errorf("record behind one not due was handled: %v", describe(c.outs[2]))
	}
	for _, i := range []int{0, 3, 4} {
		if c.errs[i] != nil || len(c.outs[i]) == 0 || c.outs[i][0].Topic != "orders.valid" {
			t.Errorf("record %d: %v %v, want processed", i, describe(c.outs[i]), c.errs[i])
		}
	}
	if c.errs[1] == nil {
		t.Error("record not due gave no error")
	}
}

// TestBatchEndsWhenTheLoopSaysSo: once Done returns false, no hook call
// starts, no result comes, and the calls in flight are cancelled before
// HandleBatch returns.
func TestBatchEndsWhenTheLoopSaysSo(t *testing.T) {
	h := newWatchHook(func(string) bool { return false }, 50*time.Millisecond)
	m := batchMachine(t, h, 4)
	var recs []*txn.Record
	for i := range 40 {
		recs = append(recs, rec("orders", 0, int64(i), fmt.Sprintf("k%d", i)))
	}
	c := newCollect()
	first := -1
	stop := &stopFirst{collect: c, first: &first}
	m.HandleBatch(context.Background(), recs, stop)
	if first < 0 {
		t.Fatal("no result at all")
	}
	if len(stop.late) > 0 {
		t.Errorf("results after the batch ended: %v", stop.late)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.now != 0 {
		t.Errorf("%d hook calls still running after HandleBatch returned", h.now)
	}
	calls := 0
	for _, ids := range h.byKey {
		calls += len(ids)
	}
	if calls > 8 {
		t.Errorf("%d hook calls though the batch ended at the first result, with 4 at once", calls)
	}
}

// stopFirst ends the batch at the first result and notes any later one.
type stopFirst struct {
	*collect
	first *int
	late  []int
}

func (s *stopFirst) Done(i int, outs []txn.Output, err error) bool {
	if *s.first >= 0 {
		s.late = append(s.late, i)
		return false
	}
	*s.first = i
	return false
}

// TestBatchOneKeyWhoseFollowersEndInPrepare: one key's records, the first
// failing at the hook: the others follow it without a try, each ending in
// prepare. Ending there makes room for the rest of the batch, which must
// still be admitted and handled (the key's queue holds two at once).
func TestBatchOneKeyWhoseFollowersEndInPrepare(t *testing.T) {
	h := newWatchHook(func(id string) bool { return id == "orders/0/0" }, time.Millisecond)
	m := batchMachine(t, h, 4)
	var recs []*txn.Record
	for i := range 6 {
		recs = append(recs, rec("orders", 0, int64(i), "A"))
	}
	c := newCollect()
	m.HandleBatch(context.Background(), recs, c)
	for i := range recs {
		if c.errs[i] != nil || len(c.outs[i]) == 0 {
			t.Fatalf("record %d: no result (%v)", i, c.errs[i])
		}
		code, _ := envelope.Lookup(c.outs[i][0].Headers, envelope.ErrorCode)
		if want := map[bool]string{true: "HOOK_UNAVAILABLE", false: CodeKeyBlocked}[i == 0]; string(code) != want {
			t.Errorf("record %d: code %q, want %q", i, code, want)
		}
	}
}

// panicHook panics in its call.
type panicHook struct{}

func (panicHook) Call(context.Context, *hook.Request) (map[string]any, error) {
	panic("hook client bug")
}

// TestBatchTryPanicReachesTheLoop: a panic in a try (on its own
// goroutine) is raised again on the goroutine that called HandleBatch,
// where relay's crash handling is, with the try's own stack.
func TestBatchTryPanicReachesTheLoop(t *testing.T) {
	m := batchMachine(t, panicHook{}, 4)
	defer func() {
		v := recover()
		if s, ok := v.(string); !ok || !strings.Contains(s, "hook client bug") || !strings.Contains(s, "panicHook") {
			t.Fatalf("recovered %v, want the try's panic with its stack", v)
		}
	}()
	m.HandleBatch(context.Background(), []*txn.Record{rec("orders", 0, 1, "a"), rec("orders", 0, 2, "b")}, newCollect())
	t.Fatal("HandleBatch returned")
}

// waveCollect is a txn.Batch that checks, at each start, what the
// transaction budget counts on: at most the concurrency of records are
// open, and none of them waits for another's key.
type waveCollect struct {
	t     *testing.T
	recs  []*txn.Record
	conc  int
	open  map[int]bool
	keys  map[string]int
	most  int
	ended int
}

func (w *waveCollect) Start(i int) bool {
	k := fmt.Sprintf("%d|%s", w.recs[i].Partition, w.recs[i].Key)
	if w.keys[k] > 0 {
		w.t.Errorf("record %d started while another of its key is open", i)
	}
	w.keys[k]++
	w.open[i] = true
	w.most = max(w.most, len(w.open))
	if len(w.open) > w.conc {
		w.t.Errorf("%d records open, concurrency %d", len(w.open), w.conc)
	}
	return true
}

func (w *waveCollect) Done(i int, _ []txn.Output, err error) bool {
	if err != nil {
		w.t.Errorf("record %d: %v", i, err)
	}
	delete(w.open, i)
	w.keys[fmt.Sprintf("%d|%s", w.recs[i].Partition, w.recs[i].Key)]--
	w.ended++
	return true
}

// TestBatchKeepsOneWaveOpen: over hot and cold keys, a batch never has
// more records open than it may try at once, nor one waiting for another's
// key: once the transaction is due, what is open ends within one try.
func TestBatchKeepsOneWaveOpen(t *testing.T) {
	const conc = 4
	h := newWatchHook(byHash(30), time.Millisecond)
	m := batchMachine(t, h, conc)
	var recs []*txn.Record
	for i := range 200 {
		key := fmt.Sprintf("k%d", i%9)
		if i%3 == 0 {
			key = "hot"
		}
		recs = append(recs, rec("orders", int32(i%2), int64(i), key))
	}
	w := &waveCollect{t: t, recs: recs, conc: conc, open: map[int]bool{}, keys: map[string]int{}}
	m.HandleBatch(context.Background(), recs, w)
	if w.ended != len(recs) || w.most < 2 {
		t.Fatalf("%d of %d records ended, at most %d open at once", w.ended, len(recs), w.most)
	}
}
