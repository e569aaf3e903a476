package txn

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// parker is a Floors handler: a record valued "park" is kept aside (no
// output); one valued "fail" fails the handler. Its floor is its lowest
// parked offset, its metadata the parked offsets and next.
type parker struct {
	parked  map[int32][]int64
	kept    []*Record // parked records, handed back after a "release"
	due     []*Record
	handled []string // "partition/offset" of every Handle call
	resumed []string // "partition@offset:metadata", in order
	failOn  string   // Resume fails on this metadata
}

func (p *parker) Handle(_ context.Context, r *Record) ([]Output, error) {
	p.handled = append(p.handled, fmt.Sprintf("%d/%d", r.Partition, r.Offset))
	if i := slices.Index(p.due, r); i >= 0 {
		p.due = slices.Delete(p.due, i, i+1)
		p.parked[r.Partition] = slices.DeleteFunc(p.parked[r.Partition], func(o int64) bool { return o == r.Offset })
		return []Output{{Topic: "out", Partition: r.Partition, Value: []byte("was parked")}}, nil
	}
	switch string(r.Value) {
	case "park":
		p.parked[r.Partition] = append(p.parked[r.Partition], r.Offset)
		p.kept = append(p.kept, r)
		return nil, nil
	case "release":
		p.due, p.kept = append(p.due, p.kept...), nil
	case "fail":
		return nil, errors.New("handler failed")
	}
	return []Output{{Topic: "out", Partition: r.Partition, Value: r.Value}}, nil
}

func (p *parker) Floor(tp TopicPartition, next int64) (int64, string) {
	ps := p.parked[tp.Partition]
	if len(ps) == 0 {
		return next, ""
	}
	return ps[0], fmt.Sprint(ps, "<", next)
}

func (p *parker) Resume(tp TopicPartition, offset int64, metadata string) error {
	p.resumed = append(p.resumed, fmt.Sprintf("%d@%d:%s", tp.Partition, offset, metadata))
	if p.failOn != "" && metadata == p.failOn {
		return errors.New("unreadable metadata")
	}
	return nil
}

func (p *parker) Due() []*Record { return slices.Clone(p.due) }

// A record the handler kept aside is handed to it again when due: it is
// written in the transaction then, and the floor moves up past it.
func TestFloorsDueRecordsAreHandledAgain(t *testing.T) {
	h := newHarness(t)
	ph := &parker{parked: map[int32][]int64{}}
	h.handler = ph
	c := h.c
	err := h.run(c.assign(0), valued(c.msg(0, 1), "park"), valued(c.msg(0, 2), "park"), c.msg(0, 3), valued(c.msg(0, 4), "release"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0/1", "0/2", "0/3", "0/4", "0/1", "0/2"}; !slices.Equal(ph.handled, want) {
		t.Errorf("handled %v, want %v", ph.handled, want)
	}
	p := h.prods[0]
	if len(p.produced) != 4 || len(p.sentOffsets) != 1 || offsetsOf(p.sentOffsets[0])[0] != 5 {
		t.Fatalf("%d outputs, offsets %v; want 4 and 5", len(p.produced), p.sentOffsets)
	}
	// Handled six times, read four: a record handed back is not consumed
	// again.
	if h.obs.consumed != 4 {
		t.Errorf("%d records consumed, want 4", h.obs.consumed)
	}
}

func valued(m *kafka.Message, v string) *kafka.Message {
	m.Value = []byte(v)
	return m
}

// A Floors handler's floor and metadata are what a transaction commits;
// a partition without parked records commits its next offset.
func TestFloorsSetTheCommittedOffsetAndMetadata(t *testing.T) {
	h := newHarness(t)
	ph := &parker{parked: map[int32][]int64{}}
	h.handler = ph
	c := h.c
	c.committed[0], c.metadata = 5, map[int32]string{0: "earlier"}
	err := h.run(c.assign(0, 1), valued(c.msg(0, 5), "park"), c.msg(0, 6), valued(c.msg(0, 7), "park"), c.msg(0, 8), c.msg(1, 3))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0@5:earlier", "1@-1001:"}; !sameSet(ph.resumed, want) {
		t.Errorf("resumed %v, want %v (the committed offsets and metadata, on assignment)", ph.resumed, want)
	}
	p := h.prods[0]
	if len(p.sentOffsets) != 1 {
		t.Fatalf("%d offset sends, want 1", len(p.sentOffsets))
	}
	got := map[int32]string{}
	for _, tp := range p.sentOffsets[0] {
		md := "<nil>"
		if tp.Metadata != nil {
			md = *tp.Metadata
		}
		got[tp.Partition] = fmt.Sprintf("%d %s", tp.Offset, md)
	}
	if want := map[int32]string{0: "5 [5 7]<9", 1: "4 "}; !maps.Equal(got, want) {
		t.Errorf("sent %v, want %v", got, want)
	}
}

// After an abort, the rewound partitions are resumed at their committed
// offsets with the metadata committed there; a partition never committed
// is rewound to the transaction's first offset and resumed there.
func TestFloorsResumeAfterARewind(t *testing.T) {
	h := newHarness(t)
	ph := &parker{parked: map[int32][]int64{}}
	h.handler = ph
	c := h.c
	c.committed[0], c.metadata = 40, map[int32]string{0: "at 40"}
	err := h.run(c.assign(0, 1), c.msg(1, 7), c.msg(0, 40), valued(c.msg(0, 41), "fail"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"0@40:at 40", "1@-1001:", "0@40:at 40", "1@7:"}
	if !sameSet(ph.resumed[:2], want[:2]) || !sameSet(ph.resumed[2:], want[2:]) {
		t.Errorf("resumed %v, want %v (assignment, then the rewind)", ph.resumed, want)
	}
}

// Metadata the handler cannot read stops relay: taking it for "nothing
// parked" would handle settled records again.
func TestFloorsUnreadableMetadataIsFatal(t *testing.T) {
	h := newHarness(t)
	h.handler = &parker{parked: map[int32][]int64{}, failOn: "garbled"}
	c := h.c
	c.committed[0], c.metadata = 3, map[int32]string{0: "garbled"}
	err := h.run(c.assign(0), c.msg(0, 3))
	if !errors.Is(err, ErrFatal) {
		t.Fatalf("Run returned %v, want ErrFatal", err)
	}
	if n := len(h.prods[0].produced); n != 0 {
		t.Errorf("%d outputs written after unreadable metadata", n)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// A parked record handed back at its turn in a transaction that reads
// nothing else of its partition (its head came back from a tier, the
// common case) must not pull the partition's commit back to just past
// it: the records handled above it in earlier transactions were settled
// there. The loop passes Floor its own next, the transaction's furthest
// record of the partition, not the partition's handled position: here 2,
// where 0/2 and 0/3 were committed before, so a restart, a new owner or
// the rewind of a later abort reads and handles them again.
func TestFloorsDueRecordAloneKeepsTheHandledPosition(t *testing.T) {
	h := newHarness(t)
	h.set.MaxRecords = 3 // the first transaction ends after 0/1, 0/2, 0/3
	ph := &parker{parked: map[int32][]int64{}}
	h.handler = ph
	c := h.c
	err := h.run(c.assign(0, 1), valued(c.msg(0, 1), "park"), c.msg(0, 2), c.msg(0, 3), valued(c.msg(1, 0), "release"))
	if err != nil {
		t.Fatal(err)
	}
	p := h.prods[0]
	if len(p.sentOffsets) != 2 {
		t.Fatalf("%d offset sends, want 2", len(p.sentOffsets))
	}
	if got := offsetsOf(p.sentOffsets[0])[0]; got != 1 {
		t.Fatalf("first commit of partition 0 at %d, want 1 (0/1 parked)", got)
	}
	for _, tp := range p.sentOffsets[1] {
		if tp.Partition != 0 {
			continue
		}
		md := ""
		if tp.Metadata != nil {
			md = *tp.Metadata
		}
		if tp.Offset < 4 && md == "" {
			t.Errorf("second commit of partition 0 at %d with no parked set: 0/%d..0/3, committed before, would be handled again (want 4)", tp.Offset, tp.Offset)
		}
	}
}

// slowParker is a parker whose due records take a while (a hook call).
type slowParker struct {
	*parker
	per time.Duration
}

func (s slowParker) Handle(ctx context.Context, r *Record) ([]Output, error) {
	if slices.Contains(s.due, r) {
		time.Sleep(s.per)
	}
	return s.parker.Handle(ctx, r)
}

// handleDue hands every due record to the handler in one go, checking
// neither the commit interval (only MaxRecords, and that once per round):
// when many keys' heads come back together, their parked records are
// handled one after the other (no hook concurrency, unlike a batch) in a
// transaction that stays open for all of them, however long their hook
// calls take, up to transaction.timeout.ms and a fence. Here 20 due
// records of 10 ms each, with a 20 ms commit interval, go in one
// transaction of 200 ms.
func TestFloorsDueRecordsKeepTheCommitInterval(t *testing.T) {
	h := newHarness(t)
	h.set.CommitInterval = 20 * time.Millisecond
	ph := &parker{parked: map[int32][]int64{}}
	h.handler = slowParker{ph, 10 * time.Millisecond}
	c := h.c
	script := []kafka.Event{c.assign(0, 1)}
	for o := int64(0); o < 20; o++ {
		script = append(script, valued(c.msg(0, o), "park"))
	}
	script = append(script, sleepEvent(30*time.Millisecond), valued(c.msg(1, 0), "release"))
	if err := h.run(script...); err != nil {
		t.Fatal(err)
	}
	if n := len(ph.handled); n != 41 {
		t.Fatalf("%d records handled, want 41", n)
	}
	if got := h.prods[0].committedTxns; got < 4 {
		t.Errorf("%d transactions: the 200 ms of due records went in at most one or two, past the 20 ms commit interval", got)
	}
}

// Review finding (a mutation no test caught): the handled position of a
// revoked partition was kept. When the partition came back, committed
// lower by its other owner (a parked record of its own holds the floor
// there), the next commit took the old, higher position and skipped what
// lies between: records 6 to 19 below. Forgotten at the revoke, the
// commit stands for what this member handled since.
func TestFloorsForgetTheHandledPositionOfARevokedPartition(t *testing.T) {
	h := newHarness(t)
	h.set.MaxRecords = 1
	ph := &parker{parked: map[int32][]int64{}}
	h.handler = ph
	c := h.c
	c.committed[0] = 5
	err := h.run(c.assign(0), c.msg(0, 19), c.revoke(0), c.assign(0), c.msg(0, 5))
	if err != nil {
		t.Fatal(err)
	}
	p := h.prods[len(h.prods)-1]
	if len(p.sentOffsets) == 0 {
		t.Fatal("nothing committed")
	}
	if got := offsetsOf(p.sentOffsets[len(p.sentOffsets)-1]); got[0] != 6 {
		t.Fatalf("committed %v after record 5 of the partition given back, want 6 (not the position before the revoke)", got)
	}
}

// refusedParker is a parker told when the brokers refused a commit's
// metadata as too large.
type refusedParker struct {
	*parker
	refused int
}

func (p *refusedParker) MetadataRefused() { p.refused++ }

// The brokers refused the offsets' metadata as too large: the handler is
// told before the abort, so that it commits less from then on (key
// ordering stops parking) instead of being refused at every commit.
func TestMetadataTooLargeIsToldToTheHandler(t *testing.T) {
	p := newFakeProducer()
	p.sendErrs = []error{fakeErr{code: kafka.ErrOffsetMetadataTooLarge, abort: true}}
	h := newHarness(t, p, newFakeProducer())
	rp := &refusedParker{parker: &parker{parked: map[int32][]int64{}}}
	h.handler = rp
	c := h.c
	if err := h.run(c.assign(0), valued(c.msg(0, 1), "park"), c.msg(0, 2)); err != nil {
		t.Fatal(err)
	}
	if rp.refused != 1 || p.abortedTxns != 1 {
		t.Fatalf("told %d times, %d aborts; want the handler told once and the transaction aborted", rp.refused, p.abortedTxns)
	}
}

// Review findings: refused again after the handler was told, the limit
// went below a set committed earlier, and every commit would be refused
// after an abort and a rewind to that set: relay stops, saying what to
// raise, rather than loop. And an abort for any other reason does not
// stop parking.
func TestMetadataTooLargeTwiceStops(t *testing.T) {
	tooLarge := fakeErr{code: kafka.ErrOffsetMetadataTooLarge, abort: true}
	p := newFakeProducer()
	p.sendErrs = []error{tooLarge, tooLarge}
	h := newHarness(t, p, newFakeProducer())
	h.set.MaxRecords = 2
	rp := &refusedParker{parker: &parker{parked: map[int32][]int64{}}}
	h.handler = rp
	c := h.c
	c.committed[0] = 1
	// The rewind reads 1 and 2 again.
	err := h.run(c.assign(0), valued(c.msg(0, 1), "park"), c.msg(0, 2), valued(c.msg(0, 1), "park"), c.msg(0, 2))
	if !errors.Is(err, ErrFatal) || !strings.Contains(err.Error(), "offset.metadata.max.bytes") || rp.refused != 1 {
		t.Fatalf("Run = %v, told %d times; want ErrFatal naming offset.metadata.max.bytes after one telling", err, rp.refused)
	}

	p = newFakeProducer()
	p.sendErrs = []error{errAbortable}
	h = newHarness(t, p, newFakeProducer())
	rp = &refusedParker{parker: &parker{parked: map[int32][]int64{}}}
	h.handler = rp
	c = h.c
	if err := h.run(c.assign(0), valued(c.msg(0, 1), "park"), c.msg(0, 2)); err != nil || rp.refused != 0 || p.abortedTxns != 1 {
		t.Fatalf("Run = %v, told %d times, %d aborts; want an abort that does not stop parking", err, rp.refused, p.abortedTxns)
	}
}
