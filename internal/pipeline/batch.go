package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"

	"relay/internal/envelope"
	"relay/internal/txn"
)

// Several records at once (RELAY_HOOK_CONCURRENCY). A record's pass is
// prepare (its ordered steps, on the loop's goroutine), try (its
// attempts: admission, rules and the hook call, on a goroutine of its
// own) and settle (its next state, on the loop's goroutine again). Tries
// overlap, at most Concurrency at once; what must stay in order does,
// through queues of names a record holds:
//
//   - its key's (key ordering), from its start until it is settled: a
//     key's records are decided one after the other, so the hook sees a
//     key's records in order, and never one that follows a record of its
//     key still failing;
//   - its failure id's (tier and replay records), likewise: two copies of
//     one replayed record are never decided at once;
//   - its partition's, under partition ordering, likewise: nothing of a
//     partition passes a record that is waited for;
//   - its partition's, for a tier or replay partition, until it has
//     started: such a record can find that it is not due yet, which
//     stops its partition, so the partition's records start in order.
//
// A source record's partition is not held under key and unordered
// ordering: records of other keys pass a slow one. A record whose held
// name is taken is not admitted yet, and the records behind it wait with
// it: a batch has at most Concurrency records open, none waiting for
// another's name (see admit), so what is open when the transaction is
// due ends within one record's bound.

// errBatchEnded ends the spans of records the loop no longer wants.
var errBatchEnded = errors.New("the transaction ended before the record was settled")

// maxBatch bounds the records handed at once.
const maxBatch = 1024

// BatchSize implements txn.BatchHandler: with a hook and a concurrency
// above one, the loop hands records in batches of eight times the
// concurrency (64 to maxBatch); else one at a time (0).
func (m *Machine) BatchSize() int {
	if m.concurrency < 2 {
		return 0
	}
	return min(max(8*m.concurrency, 64), maxBatch)
}

// HandleBatch implements txn.BatchHandler.
func (m *Machine) HandleBatch(ctx context.Context, recs []*txn.Record, b txn.Batch) {
	// Records started are finished even when relay is stopping (b.Start
	// refuses new ones then): each is bounded by its hook timeout and
	// in-place retries, and a half-handled batch would have to abort.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	s := &scheduler{
		m: m, ctx: wctx, cancel: cancel, recs: recs, b: b, slots: make([]slot, len(recs)),
		queues: map[string][]int{}, halted: map[string]int64{}, results: make(chan int, len(recs)),
	}
	s.run()
}

type scheduler struct {
	m      *Machine
	ctx    context.Context //nolint:containedctx // the batch's, cancelled when it ends early
	cancel context.CancelFunc
	recs   []*txn.Record
	b      txn.Batch
	slots  []slot
	// queues holds, per name, the slots that hold it or wait for it, in
	// order; the first holds it.
	queues   map[string][]int
	admitted int   // slots [0, admitted) were asked to start
	open     int   // admitted slots not over
	work     []int // slots that may be able to start
	ready    []int // prepared slots waiting for a try
	running  int
	halted   map[string]int64 // partitions one of whose records ended in an error, at its offset
	ended    bool
	results  chan int // tried slots
}

type slot struct {
	part    string   // its partition's name
	hold    []string // names it holds until it is over
	lane    string   // a name it holds until it has started ("" none)
	started bool
	over    bool
	st      *staged
	res     tried
	// panicked is the panic of its try, with the try's stack.
	panicked string
}

func (s *scheduler) run() {
	for {
		if !s.ended {
			// Records that end in prepare make room for more: admit
			// and start until nothing changes.
			for {
				admitted, open := s.admitted, s.open
				s.admit()
				s.startWork()
				if s.ended || s.admitted == admitted && s.open == open {
					break
				}
			}
			s.launch()
		}
		if s.running == 0 {
			if s.ended || s.open == 0 && s.admitted == len(s.recs) {
				break
			}
			if len(s.work) == 0 && len(s.ready) == 0 {
				// Slots wait for names no running record will give
				// back: not expected. The loop aborts, as it does for
				// any started record left without a result.
				s.m.log.Error("batch stalled", "admitted", s.admitted, "records", len(s.recs), "open", s.open)
				s.stop()
				break
			}
			continue
		}
		i := <-s.results
		s.running--
		sl := &s.slots[i]
		if sl.panicked != "" {
			// Re-raised on the loop's goroutine, which relay's crash
			// handling covers (exit 1, "a bug"), with the try's stack.
			panic("try of a record: " + sl.panicked) //nolint:forbidigo // a try's panic belongs to the loop's goroutine

		}
		if s.ended {
			s.m.endAbandoned(sl.st)
			continue
		}
		outs, err := s.m.settle(sl.st, sl.res)
		s.end(i, outs, err)
	}
	for _, i := range s.ready {
		s.m.endAbandoned(s.slots[i].st)
	}
	s.ready = nil
}

// admit asks the loop to start the next records, in order, while their
// names have room.
func (s *scheduler) admit() {
	// At most one wave of tries is open at once: as many records as may
	// be tried at once, none waiting for another's name (a key, a failure
	// id, a partition under partition ordering). So once the transaction
	// is due and the loop refuses the rest of the batch, what is open
	// ends within one try's bound (in-place retries included), as the
	// transaction budget counts. A record whose name is taken waits to be
	// admitted, and the records behind it with it.
	for s.admitted < len(s.recs) && s.open < s.m.concurrency {
		i := s.admitted
		sl := &s.slots[i]
		if sl.part == "" {
			sl.part, sl.hold, sl.lane = s.m.orderOf(s.recs[i])
		}
		for _, name := range sl.hold {
			if len(s.queues[name]) > 0 {
				return
			}
		}
		s.admitted++
		if !s.b.Start(i) {
			sl.over = true
			continue
		}
		s.open++
		for _, name := range sl.hold {
			s.queues[name] = append(s.queues[name], i)
		}
		if sl.lane != "" {
			s.queues[sl.lane] = append(s.queues[sl.lane], i)
		}
		s.work = append(s.work, i)
	}
}

// startWork starts every slot of the work list that heads its queues:
// it runs its ordered steps, and either ends there or waits for a try.
func (s *scheduler) startWork() {
	for len(s.work) > 0 && !s.ended {
		i := s.work[0]
		s.work = s.work[1:]
		sl := &s.slots[i]
		if sl.started || sl.over || !s.heads(i) {
			continue
		}
		if h, ok := s.halted[sl.part]; ok && s.recs[i].Offset > h {
			// An earlier record of its partition ended in an error (not
			// due yet, or a shutdown): the loop stopped the partition
			// there, and the record comes again.
			s.over(i)
			continue
		}
		sl.started = true
		st, outs, err := s.m.prepare(s.ctx, s.recs[i])
		if st == nil {
			s.end(i, outs, err)
			continue
		}
		sl.st = st
		s.releaseLane(i)
		s.ready = append(s.ready, i)
	}
}

// launch starts tries while there is room.
func (s *scheduler) launch() {
	for len(s.ready) > 0 && s.running < s.m.concurrency && !s.ended {
		i := s.ready[0]
		s.ready = s.ready[1:]
		s.running++
		sl := &s.slots[i]
		go func() {
			defer func() {
				// A panic in a try (rules, the decoder, the hook client)
				// goes to the loop's goroutine, where relay's crash
				// handling is.
				if v := recover(); v != nil {
					sl.panicked = fmt.Sprintf("%v\n%s", v, debug.Stack())
				}
				s.results <- i
			}()
			sl.res = s.m.try(sl.st.ctx, sl.st.p)
		}()
	}
}

// heads says whether slot i is first in every queue it is in.
func (s *scheduler) heads(i int) bool {
	sl := &s.slots[i]
	for _, name := range sl.hold {
		if s.queues[name][0] != i {
			return false
		}
	}
	return sl.lane == "" || s.queues[sl.lane][0] == i
}

// end gives slot i's result to the loop and lets the slots behind it go.
func (s *scheduler) end(i int, outs []txn.Output, err error) {
	outs, err = s.m.finish(s.recs[i], outs, err)
	if err != nil {
		part, off := s.slots[i].part, s.recs[i].Offset
		if h, ok := s.halted[part]; !ok || off < h {
			s.halted[part] = off
		}
	}
	s.over(i)
	if !s.b.Done(i, outs, err) {
		s.stop()
	}
}

// over takes slot i out of its queues.
func (s *scheduler) over(i int) {
	sl := &s.slots[i]
	sl.over = true
	s.open--
	for _, name := range sl.hold {
		s.pop(name, i)
	}
	s.releaseLane(i)
}

func (s *scheduler) releaseLane(i int) {
	sl := &s.slots[i]
	if sl.lane != "" {
		s.pop(sl.lane, i)
		sl.lane = ""
	}
}

// pop removes i, the head of name's queue, and puts the next head to work.
func (s *scheduler) pop(name string, i int) {
	q := s.queues[name]
	if len(q) == 0 || q[0] != i {
		return // not expected: i heads every queue it is in when it goes
	}
	if q = q[1:]; len(q) == 0 {
		delete(s.queues, name)
		return
	}
	s.queues[name] = q
	s.work = append(s.work, q[0])
}

// stop ends the batch early: tries in flight are cancelled, and their
// results dropped.
func (s *scheduler) stop() {
	s.ended = true
	s.cancel()
}

// orderOf names what rec shares order with (see the top of this file).
func (m *Machine) orderOf(rec *txn.Record) (part string, hold []string, lane string) {
	part = "p|" + rec.Topic + "|" + strconv.Itoa(int(rec.Partition))
	origin, ok := m.table.Of(rec.Topic)
	if !ok {
		return part, nil, part
	}
	derived := origin.Tier >= 0 || origin.Replay
	switch {
	case m.waitInPlace:
		hold = append(hold, part)
	case derived:
		lane = part
	}
	if m.keyOrder && rec.Key != nil && len(origin.Routes.Tiers) > 0 {
		hold = append(hold, stateKey(origin.Routes.Source, rec.Partition, rec.Key))
	}
	if derived {
		if id, ok := envelope.Lookup(rec.Headers, envelope.FailureID); ok {
			hold = append(hold, "id|"+string(id))
		}
	}
	return part, hold, lane
}

// endAbandoned ends the span of a prepared record the loop no longer
// wants.
func (m *Machine) endAbandoned(st *staged) {
	if m.tracer != nil {
		m.endSpan(st.p, errBatchEnded)
	}
}
