package txn

import (
	"context"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Review finding: a transaction due while the consumer reports its
// assignment lost was committed; the group would refuse the offsets, and
// the partitions may be another member's already. It is aborted.
func TestLostAssignmentAtTheCommitAborts(t *testing.T) {
	h := newHarness(t)
	c := h.c
	c.committed[0] = 0
	h.handler = HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
		c.lost = r.Offset == 1 // the session expired while this record was handled
		return []Output{{Topic: "out", Partition: r.Partition}}, nil
	})
	if err := h.run(c.assign(0), c.msg(0, 0), c.msg(0, 1)); err != nil {
		t.Fatal(err)
	}
	p := h.prods[0]
	if p.committedTxns != 0 || p.abortedTxns != 1 || countCalls(p, "send") != 0 {
		t.Fatalf("committed %d, aborted %d, sent offsets %d times; want an abort without offsets", p.committedTxns, p.abortedTxns, countCalls(p, "send"))
	}
}

// Review finding: a held partition's backoff restarted at its first step
// after a rebalance that gave it back to this member, so an eager
// rebalance made a partition that cannot be written try again at once.
func TestHeldPartitionStaysHeldAcrossARebalance(t *testing.T) {
	old := stallBackoff
	stallBackoff = [2]time.Duration{time.Hour, time.Hour}
	t.Cleanup(func() { stallBackoff = old })
	p := newFakeProducer()
	p.produceErrs = []error{fakeErr{code: kafka.ErrUnknownPartition}}
	h := newHarness(t, p)
	c := h.c
	c.committed[0] = 5
	if err := h.run(c.assign(0), c.msg(0, 5), c.revoke(0), c.assign(0), c.msg(0, 5)); err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, part := range c.pauses {
		if part == 0 {
			held++
		}
	}
	if held != 2 {
		t.Fatalf("partition 0 paused %d times (pauses %v), want held again when it came back", held, c.pauses)
	}
	if len(p.produced) != 0 || p.committedTxns != 0 {
		t.Fatalf("produced %d, committed %d: the held partition's record was tried again within its backoff", len(p.produced), p.committedTxns)
	}
}

// Review finding: after the group refused an offset send of an old
// generation, the abort waited for a delivery report that no delivery
// would send. It aborts at once.
func TestStaleGenerationAbortWaitsForNoReport(t *testing.T) {
	p := newFakeProducer()
	p.sendErrs = []error{fakeErr{code: kafka.ErrIllegalGeneration, abort: true}}
	h := newHarness(t, p)
	c := h.c
	c.committed[0] = 3
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.script = []kafka.Event{c.assign(0), c.msg(0, 3)}
	c.onIdle = cancel
	l := New(h.set, c, h.factory, h.handler, discard(), h.obs)
	l.reportWait = time.Hour
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the abort after a stale-generation offset send is waiting for a delivery report")
	}
	if p.abortedTxns != 1 {
		t.Fatalf("aborted %d, want 1", p.abortedTxns)
	}
}
