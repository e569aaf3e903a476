package txn

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// statsCount counts Observer.Statistics calls by client, from any
// goroutine (the producer's come from its event drain).
type statsCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *statsCount) add(client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[client]++
}

func (s *statsCount) get(client string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[client]
}

func (o *countingObserver) Statistics(client, _ string) { o.stats.add(client) }

// The consumer's statistics, polled between records, reach the observer
// and change nothing else: every record is handled and committed.
func TestConsumerStatisticsReachTheObserver(t *testing.T) {
	h := newHarness(t)
	c := h.c
	if err := h.run(c.assign(0), &kafka.Stats{}, c.msg(0, 0), &kafka.Stats{}, c.msg(0, 1)); err != nil {
		t.Fatal(err)
	}
	if n := h.obs.stats.get(kindConsumer); n != 2 {
		t.Fatalf("%d consumer statistics observed, want 2", n)
	}
	if p := h.prods[0]; p.committedTxns != 1 || len(p.produced) != 2 {
		t.Fatalf("committed %d transactions of %d records, want 1 of 2", p.committedTxns, len(p.produced))
	}
}

// Statistics polled while a batch is gathered are handed on and do not
// end the batch: the records around them are one batch.
func TestStatisticsDoNotSplitABatch(t *testing.T) {
	h := newHarness(t)
	bh := &batchHandler{t: t, size: 10, handle: func(recs []*Record, b Batch) {
		for i, r := range recs {
			if b.Start(i) {
				b.Done(i, out(r), nil)
			}
		}
	}}
	h.handler = bh
	c := h.c
	if err := h.run(c.assign(0), c.msg(0, 0), &kafka.Stats{}, c.msg(0, 1), c.msg(0, 2), sleepEvent(0)); err != nil {
		t.Fatal(err)
	}
	if len(bh.batches) != 1 || !slices.Equal(bh.batches[0], []int64{0, 1, 2}) {
		t.Fatalf("batches %v, want one of [0 1 2]", bh.batches)
	}
	if n := h.obs.stats.get(kindConsumer); n != 1 {
		t.Fatalf("%d consumer statistics observed, want 1", n)
	}
}

// The producer's statistics come through its event drain.
func TestProducerStatisticsReachTheObserver(t *testing.T) {
	h := newHarness(t)
	p := h.prods[0]
	h.handler = HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
		p.events <- &kafka.Stats{} // unbuffered: the drain has it
		return []Output{{Topic: "out", Partition: r.Partition}}, nil
	})
	c := h.c
	if err := h.run(c.assign(0), c.msg(0, 0)); err != nil {
		t.Fatal(err)
	}
	// Run closed the producer, and waited for its drain.
	if n := h.obs.stats.get(kindProducer); n != 1 {
		t.Fatalf("%d producer statistics observed, want 1", n)
	}
}

// Statistics polled while the loop waits for the coordinator's verdict on
// a fence reach the observer too.
func TestStatisticsWhileWaitingForTheVerdict(t *testing.T) {
	h, err := frozenRun(t, true, &kafka.Stats{}, sleepEvent(80*time.Millisecond))
	if err != nil || h.made != 2 {
		t.Fatalf("Run = %v, made %d producers; want a recovery", err, h.made)
	}
	if n := h.obs.stats.get(kindConsumer); n != 1 {
		t.Fatalf("%d consumer statistics observed, want 1", n)
	}
}

// An abandoned (wedged) producer still emits statistics; they are not its
// successor's and are dropped.
func TestAbandonedProducerStatisticsAreDropped(t *testing.T) {
	first, next := wedged("init")
	h := newHarness(t, first, next)
	h.set.WedgeAfter = testWedgeAfter
	obs := &wedgeObserver{}
	fence := next.onInit
	during := -1
	next.onInit = func() {
		// Two sends on the unbuffered channel: when the second is
		// taken, the drain has handled the first.
		first.events <- &kafka.Stats{}
		first.events <- &kafka.Stats{}
		during = obs.stats.get(kindProducer)
		fence()
	}
	c := h.c
	if err := h.runWatched(obs, c, c.assign(0), c.msg(0, 0)); err != nil {
		t.Fatal(err)
	}
	if during != 0 {
		t.Fatalf("%d statistics of the abandoned producer observed, want none", during)
	}
}
