package txn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"go.uber.org/goleak"

	"relay/internal/kafkaerr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness runs a Loop over fakes. Each new producer comes from prods in
// order, so tests can script the producer that replaces a failed one.
type harness struct {
	t       *testing.T
	c       *fakeConsumer
	prods   []*fakeProducer
	made    int
	set     Settings
	handler Handler
	obs     *countingObserver
}

func newHarness(t *testing.T, prods ...*fakeProducer) *harness {
	if len(prods) == 0 {
		prods = []*fakeProducer{newFakeProducer()}
	}
	return &harness{
		t:     t,
		c:     &fakeConsumer{topic: "src", committed: map[int32]kafka.Offset{}},
		prods: prods,
		set: Settings{Topics: []string{"src"}, CommitInterval: time.Hour, MaxRecords: 1000,
			OpTimeout: time.Second, ShutdownTimeout: 5 * time.Second},
		handler: HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
			return []Output{{Topic: "out", Partition: r.Partition, Value: r.Value}}, nil
		}),
		obs: &countingObserver{},
	}
}

// run plays the script, then stops the loop as SIGTERM would.
func (h *harness) run(script ...kafka.Event) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.c.script = script
	h.c.onIdle = cancel
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return New(h.set, h.c, h.factory, h.handler, log, h.obs).Run(ctx)
}

// factory hands out the scripted producers in order.
func (h *harness) factory() (Producer, error) {
	if h.made >= len(h.prods) {
		h.t.Errorf("loop made producer #%d, only %d scripted", h.made+1, len(h.prods))
		return nil, errors.New("no producer scripted")
	}
	p := h.prods[h.made]
	h.made++
	return p, nil
}

func (o *countingObserver) Consumed(n int) { o.consumed += n }

type countingObserver struct {
	NopObserver
	committed, aborted int
	consumed           int
	reasons            []string
	ready              []bool
	stats              statsCount
}

func (o *countingObserver) Ready(r bool) { o.ready = append(o.ready, r) }

func (o *countingObserver) Committed(int, int, time.Duration) { o.committed++ }
func (o *countingObserver) Aborted(why string) {
	o.aborted++
	o.reasons = append(o.reasons, why)
}

func offsetsOf(tps []kafka.TopicPartition) map[int32]int64 {
	out := map[int32]int64{}
	for _, tp := range tps {
		out[tp.Partition] = int64(tp.Offset)
	}
	return out
}

func TestCommitsOutputsWithOffsetsOnShutdown(t *testing.T) {
	h := newHarness(t)
	c := h.c
	if err := h.run(c.assign(0, 1), c.msg(0, 10), c.msg(1, 5), c.msg(0, 11)); err != nil {
		t.Fatal(err)
	}
	p := h.prods[0]
	if p.committedTxns != 1 || len(p.produced) != 3 {
		t.Fatalf("committed %d txns with %d outputs, want 1 with 3", p.committedTxns, len(p.produced))
	}
	// Committed offsets are the next offset to read, per partition.
	if got, want := offsetsOf(p.sentOffsets[0]), map[int32]int64{0: 12, 1: 6}; !mapsEqual(got, want) {
		t.Errorf("sent offsets %v, want %v", got, want)
	}
	if !c.closed || !p.closed {
		t.Error("clients not closed")
	}
}

func TestMaxRecordsEndsTransaction(t *testing.T) {
	h := newHarness(t)
	h.set.MaxRecords = 2
	c := h.c
	if err := h.run(c.assign(0), c.msg(0, 0), c.msg(0, 1), c.msg(0, 2), c.msg(0, 3), c.msg(0, 4)); err != nil {
		t.Fatal(err)
	}
	if got := h.prods[0].committedTxns; got != 3 { // 2 + 2 + 1 at shutdown
		t.Fatalf("committed %d transactions, want 3", got)
	}
}

func TestRetriableCommitIsRetried(t *testing.T) {
	p := newFakeProducer()
	p.commitErrs = []error{errRetriable}
	h := newHarness(t, p)
	c := h.c
	if err := h.run(c.assign(0), c.msg(0, 0)); err != nil {
		t.Fatal(err)
	}
	if p.committedTxns != 1 || p.abortedTxns != 0 || len(c.seeks) != 0 {
		t.Fatalf("committed=%d aborted=%d seeks=%v, want one commit after a retry", p.committedTxns, p.abortedTxns, c.seeks)
	}
	if n := countCalls(p, "commit"); n != 2 {
		t.Errorf("commit called %d times, want 2", n)
	}
}

func TestAbortableCommitAbortsAndRewindsToCommitted(t *testing.T) {
	p := newFakeProducer()
	p.commitErrs = []error{errAbortable}
	h := newHarness(t, p)
	c := h.c
	c.committed[0] = 7
	if err := h.run(c.assign(0, 1), c.msg(0, 7), c.msg(0, 8), c.msg(1, 3)); err != nil {
		t.Fatal(err)
	}
	if p.abortedTxns != 1 || p.committedTxns != 0 {
		t.Fatalf("aborted=%d committed=%d, want 1/0", p.abortedTxns, p.committedTxns)
	}
	// Partition 0 goes back to its committed offset; partition 1 never had
	// one, so it goes back to the first offset of the aborted transaction.
	if got, want := offsetsOf(c.seeks), map[int32]int64{0: 7, 1: 3}; !mapsEqual(got, want) {
		t.Errorf("seeks %v, want %v", got, want)
	}
}

func TestFencedIsFatal(t *testing.T) {
	for name, set := range map[string]func(p *fakeProducer){
		"commit": func(p *fakeProducer) { p.commitErrs = []error{errFenced} },
		"send":   func(p *fakeProducer) { p.sendErrs = []error{errFenced} },
		"init":   func(p *fakeProducer) { p.initErrs = []error{errFenced} },
		// ErrFenced without the fatal flag still counts as fenced.
		"unflagged": func(p *fakeProducer) { p.commitErrs = []error{fakeErr{code: kafka.ErrProducerFenced}} },
	} {
		t.Run(name, func(t *testing.T) {
			p := newFakeProducer()
			set(p)
			h := newHarness(t, p)
			c := h.c
			err := h.run(c.assign(0), c.msg(0, 0))
			if !errors.Is(err, ErrFatal) {
				t.Fatalf("Run = %v, want ErrFatal", err)
			}
			if p.committedTxns != 0 {
				t.Error("a fenced producer committed")
			}
			if !c.closed || !p.closed {
				t.Error("clients not closed after a fatal error")
			}
		})
	}
}

// A commit whose outcome stays unknown after its retries is not guessed at:
// a new producer is initialised (fencing the old epoch) and the consumer
// rewinds to what the committed offsets then say.
func TestUnknownCommitOutcomeReinitialisesProducer(t *testing.T) {
	for name, errs := range map[string][]error{
		"timeouts":  {errRetriable, errRetriable, errRetriable},
		"unflagged": {errOdd},
	} {
		t.Run(name, func(t *testing.T) {
			first, second := newFakeProducer(), newFakeProducer()
			first.commitErrs = errs
			h := newHarness(t, first, second)
			c := h.c
			c.committed[0] = 42 // as if the timed-out commit had landed
			if err := h.run(c.assign(0), c.msg(0, 40), c.msg(0, 41)); err != nil {
				t.Fatal(err)
			}
			if h.made != 2 || countCalls(second, "init") != 1 {
				t.Fatalf("made %d producers, second init calls %d; want a re-initialised producer", h.made, countCalls(second, "init"))
			}
			if countCalls(first, "abort") != 0 {
				t.Error("aborted a transaction whose outcome was unknown instead of re-initialising")
			}
			if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{0: 42}) {
				t.Errorf("seeks %v, want partition 0 to the committed 42", got)
			}
			if !first.closed {
				t.Error("old producer not closed")
			}
		})
	}
}

func TestRevokeCommitsOpenTransactionFirst(t *testing.T) {
	h := newHarness(t)
	c := h.c
	p := h.prods[0]
	committedAtHandover := -1
	c.afterRevoke = func() { committedAtHandover = p.committedTxns }
	// The message after the revoke is stale (fetched before it) and must
	// be dropped, not committed.
	if err := h.run(c.assign(0), c.msg(0, 0), c.msg(0, 1), c.revoke(0), c.msg(0, 2)); err != nil {
		t.Fatal(err)
	}
	if committedAtHandover != 1 {
		t.Fatalf("%d transactions committed when the partitions were handed over, want 1", committedAtHandover)
	}
	if p.committedTxns != 1 || len(p.produced) != 2 {
		t.Fatalf("committed %d txns with %d outputs, want 1 with 2", p.committedTxns, len(p.produced))
	}
	if got := offsetsOf(p.sentOffsets[0]); !mapsEqual(got, map[int32]int64{0: 2}) {
		t.Errorf("sent %v, want partition 0 at 2", got)
	}
}

func TestLostAssignmentAborts(t *testing.T) {
	h := newHarness(t)
	c := h.c
	c.committed[1] = 4
	// Partition 0 is lost (an incremental revoke); partition 1 stays.
	if err := h.run(c.assign(0, 1), c.msg(0, 0), c.msg(1, 4), lostEvent{}, c.revoke(0)); err != nil {
		t.Fatal(err)
	}
	p := h.prods[0]
	if p.abortedTxns != 1 || p.committedTxns != 0 || countCalls(p, "send") != 0 {
		t.Fatalf("aborted=%d committed=%d send=%d, want an abort without offsets", p.abortedTxns, p.committedTxns, countCalls(p, "send"))
	}
	// Only the partition this member keeps is rewound: seeking the lost
	// one would fail, and its records belong to the new owner.
	if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{1: 4}) {
		t.Errorf("seeks %v, want only partition 1 back to 4", got)
	}
}

func TestHandlerErrorAbortsAndRewinds(t *testing.T) {
	h := newHarness(t)
	fail := true
	h.handler = HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
		if r.Offset == 1 && fail {
			fail = false
			return nil, errors.New("cannot decide")
		}
		return []Output{{Topic: "out", Partition: r.Partition}}, nil
	})
	c := h.c
	c.committed[0] = 0
	if err := h.run(c.assign(0), c.msg(0, 0), c.msg(0, 1)); err != nil {
		t.Fatal(err)
	}
	p := h.prods[0]
	if p.abortedTxns != 1 {
		t.Fatalf("aborted %d, want 1", p.abortedTxns)
	}
	if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{0: 0}) {
		t.Errorf("seeks %v, want partition 0 back to 0", got)
	}
	if !slices.Contains(h.obs.reasons, "handler") {
		t.Errorf("abort reasons %v, want handler", h.obs.reasons)
	}
}

func TestAbortFailureReinitialises(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{errAbortable}
	first.abortErrs = []error{errOdd}
	h := newHarness(t, first, second)
	c := h.c
	if err := h.run(c.assign(0), c.msg(0, 5)); err != nil {
		t.Fatal(err)
	}
	if h.made != 2 {
		t.Fatalf("made %d producers, want 2", h.made)
	}
	if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{0: 5}) {
		t.Errorf("seeks %v, want partition 0 back to 5", got)
	}
}

// The loop's fake errors read as the loop expects.
func TestFakeErrorsClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want kafkaerr.Kind
	}{
		{nil, kafkaerr.None},
		{errRetriable, kafkaerr.Retriable},
		{errAbortable, kafkaerr.Abort},
		{errFenced, kafkaerr.Fatal},
		{fakeErr{code: kafka.ErrFenced, abort: true}, kafkaerr.Fatal},
		{fakeErr{code: kafka.ErrTimedOut, fatalF: true, abort: true}, kafkaerr.Fatal},
		{errOdd, kafkaerr.Unknown},
		{errors.New("plain"), kafkaerr.Unknown},
		{context.DeadlineExceeded, kafkaerr.Unknown},
	} {
		if got := kafkaerr.Classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func countCalls(p *fakeProducer, name string) int {
	n := 0
	for _, c := range p.calls {
		if c == name {
			n++
		}
	}
	return n
}

func mapsEqual(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// TestNotDuePausesAndSeeks: a record that is not due pauses its partition
// and rewinds to it; records before it commit, records after it fetched
// already are dropped (they come again), other partitions flow, and the
// partition resumes when due.
func TestNotDuePausesAndSeeks(t *testing.T) {
	h := newHarness(t)
	until := time.Now().Add(30 * time.Millisecond)
	var handled []int64
	h.handler = HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
		if r.Partition == 0 && r.Offset == 6 {
			return nil, &NotDueError{Until: until}
		}
		handled = append(handled, int64(r.Partition)*100+r.Offset)
		return []Output{{Topic: "out", Partition: r.Partition}}, nil
	})
	h.c.onIdle = nil
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.c.script = []kafka.Event{h.c.assign(0, 1), h.c.msg(0, 5), h.c.msg(0, 6), h.c.msg(0, 7), h.c.msg(1, 3)}
	h.c.onIdle = func() {
		if time.Now().After(until.Add(150 * time.Millisecond)) {
			cancel()
		}
	}
	h.set.CommitInterval = 10 * time.Millisecond
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := h.prods[0]
	if err := New(h.set, h.c, func() (Producer, error) { return p, nil }, h.handler, log, h.obs).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(handled, []int64{5, 103}) {
		t.Fatalf("handled %v, want [5 103]: offset 7 was fetched before the pause and must be dropped", handled)
	}
	if !slices.Equal(h.c.pauses, []int32{0}) || !slices.Contains(h.c.resumes, 0) {
		t.Fatalf("pauses %v resumes %v", h.c.pauses, h.c.resumes)
	}
	if len(h.c.seeks) != 1 || h.c.seeks[0].Offset != 6 {
		t.Fatalf("seeks %v, want one to offset 6", h.c.seeks)
	}
	if got := offsetsOf(p.sentOffsets[0]); got[0] != 6 || got[1] != 4 {
		t.Fatalf("committed %v, want partition 0 at 6 (not past the waiting record) and 1 at 4", got)
	}
	if p.abortedTxns != 0 {
		t.Fatal("a record that is not due must not abort the transaction")
	}
}

// TestRevokeDuringLongOutageIsNotFatal pins the cause of a CI failure of
// TestBrokerRestart: the broker went away while a transaction was open,
// the session timed out (assignment lost), and the abort and the new
// producer's InitTransactions inside the rebalance callback outlasted a
// bound of ShutdownTimeout. relay then stopped with a fatal "context
// deadline exceeded". An outage is waited out, however long.
func TestRevokeDuringLongOutageIsNotFatal(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.abortErrs = []error{errRetriable, errRetriable, errRetriable}
	// The replacement producer cannot reach the coordinator for a while:
	// persist backs off 100ms, 200ms, 400ms, 800ms, 1.6s.
	second.initErrs = []error{errRetriable, errRetriable, errRetriable, errRetriable, errRetriable}
	h := newHarness(t, first, second)
	h.set.ShutdownTimeout = 200 * time.Millisecond
	if err := h.run(h.c.assign(0), h.c.msg(0, 0), lostEvent{}, h.c.revoke(0), h.c.assign(0), h.c.msg(0, 0)); err != nil {
		t.Fatalf("a long outage during a revoke stopped relay: %v", err)
	}
	if countCalls(second, "init") != 6 || second.committedTxns != 1 {
		t.Fatalf("replacement producer: init calls %d, committed %d; want it to wait for the coordinator, then carry on",
			countCalls(second, "init"), second.committedTxns)
	}
}

// stateful is a handler with durable state: it counts how often the loop
// asks it to load and to forget its partitions.
type stateful struct {
	assigned, revoked int
}

func (s *stateful) Handle(_ context.Context, r *Record) ([]Output, error) {
	return []Output{{Topic: "out", Partition: r.Partition, Value: r.Value}}, nil
}
func (s *stateful) OnAssigned(context.Context, []int32) error { s.assigned++; return nil }
func (s *stateful) OnRevoked([]int32)                         { s.revoked++ }

// After a commit with an unknown outcome the handler's memory may be behind
// the commit that landed: the loop makes it read its state again once the
// new producer has settled the old transaction.
func TestUnknownCommitOutcomeReloadsHandlerState(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{errOdd}
	h := newHarness(t, first, second)
	s := &stateful{}
	h.handler = s
	h.c.committed[0] = 42
	if err := h.run(h.c.assign(0), h.c.msg(0, 40), h.c.msg(0, 41)); err != nil {
		t.Fatal(err)
	}
	if s.revoked < 1 || s.assigned < 2 {
		t.Fatalf("assigned %d, revoked %d; want the state forgotten and loaded again after the re-initialisation", s.assigned, s.revoked)
	}
}

// reloading is a handler that reloads its state in place.
type reloading struct {
	stateful
	reloaded int
}

func (r *reloading) Reload(context.Context, []int32) error { r.reloaded++; return nil }

// A handler that can reload its state in place is asked to, and not told
// its partitions went: what it holds only in memory (partition ordering's
// waits) must outlive the rewind, as it outlives an abort.
func TestUnknownCommitOutcomeReloadsInPlace(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{errOdd}
	h := newHarness(t, first, second)
	r := &reloading{}
	h.handler = r
	h.c.committed[0] = 42
	if err := h.run(h.c.assign(0), h.c.msg(0, 40), h.c.msg(0, 41)); err != nil {
		t.Fatal(err)
	}
	if r.reloaded != 1 || r.revoked != 0 {
		t.Fatalf("reloaded %d, revoked %d; want one reload and no revoke", r.reloaded, r.revoked)
	}
}

type owning struct {
	stateful
	owned [][]TopicPartition
}

func (o *owning) OnOwned(tps []TopicPartition) { o.owned = append(o.owned, tps) }

// An OwnershipListener hears the whole assignment after every change.
func TestOwnershipListenerHearsEveryChange(t *testing.T) {
	h := newHarness(t)
	o := &owning{}
	h.handler = o
	if err := h.run(h.c.assign(0, 1), h.c.msg(0, 0), h.c.revoke(0, 1)); err != nil {
		t.Fatal(err)
	}
	if len(o.owned) != 2 || len(o.owned[0]) != 2 || len(o.owned[1]) != 0 {
		t.Fatalf("heard %v; want both partitions, then none", o.owned)
	}
}

// A broker that refuses relay's credential makes relay not ready, and
// fails no record: the record in hand is committed once the broker takes
// it, and relay is ready again.
func TestRefusedCredentialIsNotReadyUntilACommit(t *testing.T) {
	h := newHarness(t)
	h.set.MaxRecords = 1
	c := h.c
	refused := kafka.NewError(kafka.ErrAuthentication, "SASL authentication error: Authentication failed", false)
	if err := h.run(c.assign(0), refused, refused, c.msg(0, 0)); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(h.obs.ready); got != "[true false true false]" {
		t.Fatalf("ready %s; want ready, not ready on the refusal (once), ready after the commit, not ready at the stop", got)
	}
	if p := h.prods[0]; p.committedTxns != 1 || len(p.produced) != 1 {
		t.Fatalf("committed %d with %d outputs", p.committedTxns, len(p.produced))
	}
}

// A commit of a transaction begun before the refusal proves nothing: the
// connections it used may predate the refusal. relay stays not ready.
func TestRefusalDuringATransactionOutlivesItsCommit(t *testing.T) {
	h := newHarness(t)
	h.set.MaxRecords = 2
	c := h.c
	refused := kafka.NewError(kafka.ErrAuthentication, "SASL authentication error: Authentication failed", false)
	if err := h.run(c.assign(0), c.msg(0, 0), refused, c.msg(0, 1)); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(h.obs.ready); got != "[true false false]" {
		t.Fatalf("ready %s; want not ready from the refusal on, through the commit", got)
	}
	if p := h.prods[0]; p.committedTxns != 1 || len(p.produced) != 2 {
		t.Fatalf("committed %d with %d outputs", p.committedTxns, len(p.produced))
	}
}
