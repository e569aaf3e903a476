package pipeline

import (
	"time"

	"relay/internal/ledger"
	"relay/internal/tiers"
	"relay/internal/txn"
)

type partKey struct {
	topic     string
	partition int32
}

type waitState struct {
	until time.Time
	st    tiers.State
}

// waits holds, under partition ordering, the records partitions wait for,
// by offset, each with its retry state. It is not part of a transaction:
// an abort rewinds a partition to before its waiting record, and that
// record must come back to the same wait and budget, not a fresh one. A
// wait is dropped once a transaction that resolved its record (or a record
// past it) commits, or when the partition is revoked.
type waits struct {
	m map[partKey]map[int64]*waitState
	// passed is, per partition with a wait, the last offset the open
	// transaction resolved.
	passed map[partKey]int64
}

func (w *waits) get(pk partKey, offset int64) *waitState { return w.m[pk][offset] }

func (w *waits) set(pk partKey, offset int64, s *waitState) {
	if w.m == nil {
		w.m = map[partKey]map[int64]*waitState{}
	}
	if w.m[pk] == nil {
		w.m[pk] = map[int64]*waitState{}
	}
	w.m[pk][offset] = s
}

// resolved notes that the open transaction gave the record at offset its
// next state.
func (w *waits) resolved(pk partKey, offset int64) {
	if len(w.m[pk]) == 0 {
		return // nothing waits in the partition
	}
	if w.passed == nil {
		w.passed = map[partKey]int64{}
	}
	if last, ok := w.passed[pk]; !ok || offset > last {
		w.passed[pk] = offset
	}
}

// commit drops the waits the committed transaction went past.
func (w *waits) commit() {
	for pk, last := range w.passed {
		for offset := range w.m[pk] {
			if offset <= last {
				delete(w.m[pk], offset)
			}
		}
		if len(w.m[pk]) == 0 {
			delete(w.m, pk)
		}
	}
	clear(w.passed)
}

// abort keeps every wait: the records are handled again from the
// committed offsets, and those that waited still wait.
func (w *waits) abort() { clear(w.passed) }

// forget drops the waits of revoked partitions: their next owner starts
// their records' budgets again (see docs/GUIDE.md on partition ordering).
func (w *waits) forget(partitions []int32) {
	for pk := range w.m {
		for _, p := range partitions {
			if pk.partition == p {
				delete(w.m, pk)
				delete(w.passed, pk)
			}
		}
	}
}

func (w *waits) len() int {
	n := 0
	for _, m := range w.m {
		n += len(m)
	}
	return n
}

// checkWait finds the wait of a record its partition waits for
// (partition ordering): back before its time (a rewind after an abort
// resumed the partition), it still waits; when due, it is tried again with
// the retry state it waited with.
func (m *Machine) checkWait(p *pass) error {
	w := m.waits.get(partKey{p.rec.Topic, p.rec.Partition}, p.rec.Offset)
	if w == nil {
		return nil
	}
	if p.now.Before(w.until) {
		return &txn.NotDueError{Until: w.until}
	}
	p.st = w.st
	p.st.Attempt++
	return nil
}

// waitHere makes the record's partition wait for it instead of moving it
// to a tier (partition ordering): the partition is paused and nothing after
// the record is committed until it is done. The tier delays are its waits.
func (m *Machine) waitHere(p *pass, v verdict, now time.Time) error {
	next := p.st
	next.AtSource, next.Tier, next.InPlace = false, v.Tier, 0
	until := now.Add(v.Delay)
	p.traceOutcome(ledger.OutcomeRetry, v.Class.String(), v.Code, m.redactor.Redact(v.cause.Error()))
	m.waits.set(partKey{p.rec.Topic, p.rec.Partition}, p.rec.Offset, &waitState{until: until, st: next})
	if m.failures.allow(m.log, v.Code, now) {
		m.log.Info("record failed; its partition waits for it", append([]any{"id", p.id, "code", v.Code, "attempt", p.st.Attempt,
			"until", until, "error", m.redactor.Redact(v.cause.Error())}, p.traceAttrs()...)...)
	}
	return &txn.NotDueError{Until: until}
}
