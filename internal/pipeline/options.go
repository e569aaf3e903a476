package pipeline

import (
	"errors"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/tiers"
	"relay/internal/tracing"
)

// Options is what a Machine is built from. Table, Group and Redactor are
// required; every other part may be left out.
type Options struct {
	// Table routes every topic relay consumes (required).
	Table *Table
	// Group is the consumer group, written into every envelope (required).
	Group  string
	Policy tiers.Policy
	// Admitter checks values against the schema registry; without one
	// values are not checked, and Rules and Hook are not used (they
	// need the decoded record).
	Admitter Admitter
	Rules    Rules // none: no rules
	Hook     Hook  // none: no hook
	// Concurrency is how many records' attempts (hook calls) run at once
	// (RELAY_HOOK_CONCURRENCY); with a Hook and more than one, the loop
	// hands records in batches (see HandleBatch). Zero: one.
	Concurrency int
	// Redactor bounds and redacts every error message written (required).
	Redactor *envelope.Redactor
	Compat   envelope.Compat
	Outcomes Outcomes     // none: outcomes are not counted
	Log      *slog.Logger // none: nothing is logged
	Now      Clock        // none: time.Now
	// WaitInPlace is the partition ordering policy: a record whose
	// retries are not done waits at its place in its partition (paused,
	// see txn.NotDueError) instead of moving to a tier, so nothing of the
	// partition passes it. The tier delays are its waits.
	WaitInPlace bool
	// Keys, when set, keeps per-key order (RELAY_ORDERING=key).
	Keys *KeyOrdering
	// StateTopic, when set, is where the quarantine ledger is written:
	// every quarantine, and every outcome of a replayed record, is a
	// ledger record of the same transaction (see package ledger).
	StateTopic string
	// Actor names this instance in the ledger.
	Actor string
	// Settled recognises copies of replayed records whose failure is
	// settled already (with StateTopic); none: an empty one.
	Settled *ledger.Settled
	// Discards says at a replayed record's turn whether its failure was
	// discarded since the ledger was restored; none: never.
	Discards Discards
	// LoadState reads the committed records of state-topic partitions;
	// OnAssigned restores blocked keys and settled failures from it.
	// None: there is nothing to restore.
	LoadState StateLoader
	// Tracer makes a process span of every pass, and the records of the
	// pass carry its trace context; none: no span, and records carry
	// the trace context they came with.
	Tracer trace.Tracer
	// Propagation is what OTEL_PROPAGATORS asks for besides W3C trace
	// context: the foreign propagators read from a source record without
	// a traceparent and written on its records. None: W3C alone.
	Propagation *tracing.Propagation
	// Clients names the broker and the clients on the spans.
	Clients Clients
}

// New builds the machine of o: it checks the required parts and puts a
// part that does nothing in the place of each optional one left out.
func New(o Options) (*Machine, error) {
	var errs []error
	if o.Table == nil {
		errs = append(errs, errors.New("pipeline: Options.Table is required"))
	}
	if o.Group == "" {
		errs = append(errs, errors.New("pipeline: Options.Group is required"))
	}
	if o.Redactor == nil {
		errs = append(errs, errors.New("pipeline: Options.Redactor is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	m := &Machine{
		table: o.Table, group: o.Group, policy: o.Policy, admitter: o.Admitter, rules: o.Rules, callHook: noHook,
		redactor: o.Redactor, compat: o.Compat, outcomes: o.Outcomes, log: o.Log, now: o.Now,
		waitInPlace: o.WaitInPlace, keyOrder: o.Keys != nil, keys: o.Keys, stateTopic: o.StateTopic, actor: o.Actor,
		settled: o.Settled, discards: o.Discards, loadState: o.LoadState, loaded: map[int32]bool{}, tracer: o.Tracer, spans: newSpanOpts(o.Clients, o.Propagation),
	}
	switch {
	case m.admitter == nil:
		m.admitter, m.rules = unchecked{}, noRules{}
	case o.Hook != nil:
		m.callHook = callerOf(o.Hook)
		if o.Concurrency > 1 {
			m.concurrency = o.Concurrency
		}
	}
	m.rules = orDefault[Rules](m.rules, noRules{})
	m.outcomes = orDefault[Outcomes](m.outcomes, uncounted{})
	m.discards = orDefault[Discards](m.discards, noDiscards{})
	if m.log == nil {
		m.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.keys == nil {
		m.keys = &KeyOrdering{}
	}
	m.keys.Spill(m.keys.Park.Wait, m.keys.Park.MaxAge, m.now)
	if m.settled == nil {
		m.settled = &ledger.Settled{}
	}
	if m.loadState == nil {
		m.loadState = noState
	}
	return m, nil
}

// orDefault is part, or def when part was left out.
func orDefault[P comparable](part, def P) P {
	var none P
	if part == none {
		return def
	}
	return part
}

// Table is the routes of every topic the machine handles.
func (m *Machine) Table() *Table { return m.table }

// Topics lists every topic the machine handles: sources, tiers and replay.
func (m *Machine) Topics() []string { return m.table.Topics() }
