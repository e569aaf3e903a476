package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/schema"
	"relay/internal/tiers"
	"relay/internal/tracing"
	"relay/internal/txn"
)

// Machine is the failure state machine; it implements txn.Handler. Build
// it with New.
type Machine struct {
	table       *Table
	group       string
	policy      tiers.Policy
	admitter    Admitter
	rules       Rules
	callHook    hookCall
	redactor    *envelope.Redactor
	compat      envelope.Compat
	outcomes    Outcomes
	log         *slog.Logger
	now         Clock
	waitInPlace bool
	keyOrder    bool         // RELAY_ORDERING=key
	keys        *KeyOrdering // the blocked keys; empty without keyOrder
	stateTopic  string
	actor       string
	settled     *ledger.Settled
	discards    Discards
	loadState   StateLoader
	tracer      trace.Tracer // nil: no spans
	concurrency int          // tries at once in a batch; 0: one record at a time
	spans       *spanOpts    // the process spans' options and names

	pending  pending        // what the open transaction will have done
	loaded   map[int32]bool // partitions whose state was restored
	waits    waits          // the records partitions wait for (waitInPlace)
	stale    staleKeys      // key states to delete while key ordering is off
	failures failureLog     // the "record failed" lines, bounded per code and window
	// refused counts the followers copied instead of parked, by reason,
	// as their transactions commit; parkStats is what ParkStats reads.
	refused   map[string]int64
	parkStats atomic.Pointer[ParkStats]
	lost      lost // parked records gone from their source
}

// pass is one record on its way through the machine: where it comes from,
// its identity, and what is known of its failures and its key so far.
type pass struct {
	rec       *txn.Record
	origin    Origin
	now       time.Time
	prev      *envelope.Failure // its envelope, from a tier or replay record
	id        string
	srcOffset int64
	fp        string // relay.source.fingerprint
	st        tiers.State
	keyed     bool
	kr        keyedRecord
	// span is the pass's process span and tc its trace context, which the
	// pass's records carry (nil and empty without a tracer).
	span trace.Span
	tc   tracing.Context
	// sender makes the send spans of the pass's records when span is
	// recorded; else nil.
	sender *sender
}

// verdict is what a pass that did not pass comes to: the decision, the
// failure that led to it, and the writer schema as far as known.
type verdict struct {
	tiers.Decision
	cause error
	info  schema.Info
}

// Handle implements txn.Handler: the record's steps one after the other
// (see HandleBatch for several records at once).
func (m *Machine) Handle(ctx context.Context, rec *txn.Record) ([]txn.Output, error) {
	st, outs, err := m.prepare(ctx, rec)
	if st != nil {
		outs, err = m.settle(st, m.try(st.ctx, st.p))
	}
	return m.finish(rec, outs, err)
}

// finish is what every handled record ends with: once it reached its
// next state in the open transaction and that commits, no wait at or
// before it is needed; and its partition's stale key states go with it.
func (m *Machine) finish(rec *txn.Record, outs []txn.Output, err error) ([]txn.Output, error) {
	if err == nil {
		m.keys.Drop(partOf(rec), rec.Offset) // a parked record handled at its turn
		m.waits.resolved(partKey{rec.Topic, rec.Partition}, rec.Offset)
		outs = append(outs, m.stale.tombstones(m.stateTopic, rec.Partition)...)
	}
	return outs, err
}

// staged is a pass whose ordered steps are done and whose attempts are
// next; ctx carries its process span.
type staged struct {
	p   *pass
	ctx context.Context //nolint:containedctx // the pass's, from prepare to settle
}

// prepare takes rec through the steps of its pass before its attempts;
// the first step that decides the record ends it (st nil: outs and err
// are the record's). Each step reads and writes the machine's state, so
// prepare runs on the loop's goroutine, in the order of the records that
// share a key (see HandleBatch).
//
//   - identify: where it comes from, and its envelope (identify.go);
//   - key turn: a record of a blocked key that is not at its turn follows
//     the key's head (keyturn.go);
//   - settled: a copy of a replayed record whose failure is settled, or
//     was discarded, is not handled again (settled.go);
//   - held: the key of an earlier quarantined record holds it (keyturn.go);
//   - wait: a record its partition waits for is not due yet (wait.go).
//
// Then try runs the attempts (attempt.go), and settle writes the records
// of the record's next state (emit.go) and what that settles: counts, the
// ledger, its key's turn (outcome.go).
func (m *Machine) prepare(ctx context.Context, rec *txn.Record) (st *staged, outs []txn.Output, err error) {
	if outs, ok := m.carried(rec); ok {
		return nil, outs, nil
	}
	origin, ok := m.table.Of(rec.Topic)
	if !ok {
		return nil, nil, fmt.Errorf("record from %s, a topic relay does not route", rec.Topic)
	}
	if m.readAgain(rec) {
		return nil, nil, nil
	}
	p, bad, err := m.identify(rec, origin)
	if p == nil {
		return nil, nil, err
	}
	if m.tracer != nil {
		ctx = m.startSpan(ctx, p)
	}
	defer func() {
		if st == nil && m.tracer != nil {
			m.endSpan(p, err)
		}
	}()
	if bad != nil {
		return nil, m.unreadable(p, bad), nil
	}
	if outs, done := m.takeTurn(p); done {
		return nil, outs, nil
	}
	if outs, done, err := m.checkSettled(ctx, p); done {
		return nil, outs, err
	}
	if outs, done := m.checkHeld(p); done {
		return nil, outs, nil
	}
	if err := m.checkWait(p); err != nil {
		return nil, nil, err
	}
	return &staged{p: p, ctx: ctx}, nil, nil
}

// readAgain says whether rec is a record its partition, read again from
// a commit with parked records, handles no further: one settled before
// that commit, or a parked one, which is kept in memory again (still
// parked) until its turn.
func (m *Machine) readAgain(rec *txn.Record) bool {
	part := partOf(rec)
	if _, _, parked := m.keys.SlotOf(part, rec.Offset); parked {
		if kept, ok := m.keys.Kept(part, rec.Offset); ok && kept == rec {
			return false // handed back at its turn
		}
		m.passed(rec)
		m.keys.Keep(part, rec.Offset, rec, recordSize(rec))
		return true
	}
	m.passed(rec)
	return m.keys.Skip(part, rec.Offset)
}

// settle is what the attempts of st came to: the records of its next
// state, or an error (a record its partition waits for, or a shutdown).
// It ends the pass's span.
func (m *Machine) settle(st *staged, r tried) (outs []txn.Output, err error) {
	p := st.p
	if m.tracer != nil {
		defer func() { m.endSpan(p, err) }()
	}
	switch {
	case r.err != nil:
		return nil, r.err
	case r.v == nil:
		return m.processed(p, r.value, r.info), nil
	case r.v.Kind == tiers.RetryTier && m.waitInPlace:
		return nil, m.waitHere(p, *r.v, r.now)
	default:
		return m.decided(p, *r.v), nil
	}
}

var (
	_ txn.Handler           = (*Machine)(nil)
	_ txn.PartitionListener = (*Machine)(nil)
	_ txn.TxnListener       = (*Machine)(nil)
	_ txn.StateReloader     = (*Machine)(nil)
	_ txn.Floors            = (*Machine)(nil)
)
