package txn

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Regression: a record that failed while it was the first of its partition
// in the open transaction was not rewound (first[tp] was set only after its
// outputs were enqueued). librdkafka's position was already past it, so the
// next poll returned the following record and the next commit carried the
// failed record's offset with it: the record had no end state.
//
// Each case fails one call on partition 1's first record (offset 3) while
// partition 0 already has a record in the transaction; partition 1 must be
// sought back to 3.
func TestFailureOnFirstRecordOfPartitionRewindsIt(t *testing.T) {
	for name, tc := range map[string]struct {
		setup   func(h *harness, p *fakeProducer)
		onlyOne bool // the failing record is alone in its transaction
	}{
		"handle": {setup: func(h *harness, _ *fakeProducer) {
			fail := true
			h.handler = HandlerFunc(func(_ context.Context, r *Record) ([]Output, error) {
				if r.Partition == 1 && fail {
					fail = false
					return nil, errors.New("cannot decide")
				}
				return []Output{{Topic: "out", Partition: r.Partition}}, nil
			})
		}},
		"produce": {setup: func(_ *harness, p *fakeProducer) {
			p.produceErrs = []error{nil, fakeErr{code: kafka.ErrUnknownPartition}}
		}},
		// librdkafka's state after an earlier delivery failed: every
		// Produce answers _STATE until the transaction is aborted.
		"produce in abortable state": {setup: func(_ *harness, p *fakeProducer) {
			p.produceErrs = []error{nil, fakeErr{code: kafka.ErrState}}
		}},
		"begin": {onlyOne: true, setup: func(_ *harness, p *fakeProducer) {
			p.beginErrs = []error{errAbortable}
		}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			p := h.prods[0]
			tc.setup(h, p)
			c := h.c
			c.committed[0], c.committed[1] = 5, 3
			script := []kafka.Event{c.assign(0, 1), c.msg(0, 5), c.msg(1, 3)}
			want := map[int32]int64{0: 5, 1: 3}
			if tc.onlyOne {
				script = []kafka.Event{c.assign(0, 1), c.msg(1, 3)}
				want = map[int32]int64{1: 3}
			}
			if err := h.run(script...); err != nil {
				t.Fatal(err)
			}
			if got := offsetsOf(c.seeks); !mapsEqual(got, want) {
				t.Fatalf("seeks %v, want %v: the failed record must be read again", got, want)
			}
			for _, offs := range p.sentOffsets {
				if got := offsetsOf(offs); got[1] > 3 {
					t.Fatalf("committed partition 1 at %d, past the failed record 3", got[1])
				}
			}
		})
	}
}

// Regression: rewind read a partition's error answer from Committed()
// (offset -1001) as "never committed" and sought to the transaction's first
// offset. After an unknown commit outcome that did land, that handles the
// committed records again. An error is asked again, never guessed at.
func TestRewindRetriesCommittedPartitionError(t *testing.T) {
	first, second := newFakeProducer(), newFakeProducer()
	first.commitErrs = []error{errOdd} // outcome unknown: it landed
	h := newHarness(t, first, second)
	c := h.c
	c.committed[0] = 42
	c.partErrs = []int32{0}
	if err := h.run(c.assign(0), c.msg(0, 40), c.msg(0, 41)); err != nil {
		t.Fatal(err)
	}
	if got := offsetsOf(c.seeks); !mapsEqual(got, map[int32]int64{0: 42}) {
		t.Fatalf("seeks %v, want partition 0 at the committed 42, not the transaction's first offset 40", got)
	}
}

// Reports of purged messages (librdkafka purges the queue when a
// transaction turns abortable) are no partition's fault. A partition that
// refused a record is blamed; so is one whose record was not delivered in
// time while others of the transaction took theirs (review finding: a
// partition without enough in-sync replicas failed every transaction).
func TestPartitionFaultsAndPartialTimeoutsAreBlamed(t *testing.T) {
	l := New(Settings{}, &fakeConsumer{}, nil, nil, discard(), nil)
	for p := range int32(3) {
		l.wrote(tpKey{"src", p}, &Output{Topic: "out", Partition: p})
	}
	out := "out"
	add := func() {
		l.deliveries.add(kafka.TopicPartition{Topic: &out, Partition: 0, Error: kafka.NewError(kafka.ErrPurgeQueue, "purged", false)}, 0)
		l.deliveries.add(kafka.TopicPartition{Topic: &out, Partition: 1, Error: kafka.NewError(kafka.ErrMsgTimedOut, "timed out", false)}, 1)
		l.deliveries.add(kafka.TopicPartition{Topic: &out, Partition: 2, Error: kafka.NewError(kafka.ErrMsgSizeTooLarge, "too large", false)}, 2)
	}
	// Nothing was delivered: the timeout blames no partition, the
	// refusal does.
	l.producer = &handle{lastOK: map[tpKey]int64{}}
	add()
	if blamed := l.blame(false); len(blamed) != 1 || blamed[tpKey{"src", 2}] == nil {
		t.Fatalf("blamed %v with nothing delivered, want src[2] (refused) only", blamed)
	}
	// out[0] delivered a record of this transaction: out[1]'s timeout is
	// its own.
	l.producer.lastOK[tpKey{"out", 0}] = 3
	add()
	blamed := l.blame(false)
	if len(blamed) != 2 || blamed[tpKey{"src", 1}] == nil || blamed[tpKey{"src", 2}] == nil {
		t.Fatalf("blamed %v, want src[1] (timed out while out[0] took its record) and src[2] (refused)", blamed)
	}
}

// Review finding: an output partition that takes no writes (too few
// in-sync replicas) made every commit time out, and the producer was
// re-initialised without blaming any partition, so nothing committed
// anywhere. After a commit timed out, the sources of the output partitions
// that delivered nothing of the transaction, while others delivered, are
// held; when nothing was delivered anywhere the brokers are away, and no
// partition is held for it (every one would be).
func TestCommitTimeoutBlamesSilentPartitionsOnly(t *testing.T) {
	l := New(Settings{}, &fakeConsumer{}, nil, nil, discard(), nil)
	h := &handle{lastOK: map[tpKey]int64{}}
	l.txnFrom = 10
	for p := range int32(3) {
		l.wrote(tpKey{"src", p}, &Output{Topic: "out", Partition: p})
	}
	if blamed := l.blameSilent(h); len(blamed) != 0 {
		t.Fatalf("blamed %v with nothing delivered anywhere, want none", blamed)
	}
	h.lastOK[tpKey{"out", 0}] = 12
	h.lastOK[tpKey{"out", 1}] = 4 // an earlier transaction's
	blamed := l.blameSilent(h)
	if len(blamed) != 2 || blamed[tpKey{"src", 1}] == nil || blamed[tpKey{"src", 2}] == nil {
		t.Fatalf("blamed %v, want src[1] and src[2], whose outputs delivered nothing while out[0] did", blamed)
	}
}

// Review finding: a failed delivery of an aborted transaction reported
// after its abort was blamed on the next transaction's failure, mapped
// through that transaction's outputs: an innocent partition was held.
// Reports are matched to their transaction by their ordinal.
func TestLateReportOfAnAbortedTransactionBlamesNothingLater(t *testing.T) {
	l := New(Settings{}, &fakeConsumer{}, nil, nil, discard(), nil)
	out := "out"
	// The earlier transaction took reports 0–9; this one from 10 on, and
	// src[1] wrote to out[0] in it.
	l.txnFrom = 10
	l.wrote(tpKey{"src", 1}, &Output{Topic: "out", Partition: 0})
	l.deliveries.add(kafka.TopicPartition{Topic: &out, Partition: 0, Error: kafka.NewError(kafka.ErrMsgSizeTooLarge, "too large", false)}, 7)
	if blamed := l.blame(false); len(blamed) != 0 {
		t.Fatalf("blamed %v for a report of an earlier transaction", blamed)
	}
	l.deliveries.add(kafka.TopicPartition{Topic: &out, Partition: 0, Error: kafka.NewError(kafka.ErrMsgSizeTooLarge, "too large", false)}, 12)
	if blamed := l.blame(false); blamed[tpKey{"src", 1}] == nil {
		t.Fatalf("blamed %v, want src[1] for a report of its own transaction", blamed)
	}
}

// A held partition is tried again in a transaction of its own: the open
// transaction, with the other partitions' work, commits first, so a
// partition that still cannot be written does not abort theirs.
func TestStalledPartitionRetriedAfterCommit(t *testing.T) {
	old := stallBackoff
	stallBackoff = [2]time.Duration{40 * time.Millisecond, 40 * time.Millisecond}
	t.Cleanup(func() { stallBackoff = old })
	p := newFakeProducer()
	p.produceErrs = []error{fakeErr{code: kafka.ErrUnknownPartition}}
	h := newHarness(t, p)
	c := h.c
	c.committed[0], c.committed[1] = 5, 3
	if err := h.run(c.assign(0, 1), c.msg(1, 3), c.msg(0, 5), sleepEvent(50*time.Millisecond), c.msg(1, 3)); err != nil {
		t.Fatal(err)
	}
	if p.abortedTxns != 1 || p.committedTxns != 2 {
		t.Fatalf("aborted %d, committed %d; want the failed try aborted, then two commits", p.abortedTxns, p.committedTxns)
	}
	if got := offsetsOf(p.sentOffsets[0]); !mapsEqual(got, map[int32]int64{0: 6}) {
		t.Fatalf("first commit %v, want partition 0's work alone before partition 1 is tried again", got)
	}
	if got := offsetsOf(p.sentOffsets[1]); !mapsEqual(got, map[int32]int64{1: 4}) {
		t.Fatalf("second commit %v, want partition 1 at 4", got)
	}
	if !slices.Contains(c.pauses, 1) || !slices.Contains(c.resumes, 1) {
		t.Fatalf("pauses %v resumes %v: partition 1 must be held, then resumed", c.pauses, c.resumes)
	}
}

// A partition's permanent answer to the committed-offset fetch (not
// authorised) stops relay instead of retrying without polling for ever.
func TestRewindStopsOnPermanentCommittedError(t *testing.T) {
	p := newFakeProducer()
	p.commitErrs = []error{errAbortable}
	h := newHarness(t, p)
	h.c.partErrCode = kafka.ErrTopicAuthorizationFailed
	h.c.partErrs = []int32{0}
	err := h.run(h.c.assign(0), h.c.msg(0, 1))
	if !errors.Is(err, ErrFatal) {
		t.Fatalf("Run = %v, want ErrFatal", err)
	}
}
