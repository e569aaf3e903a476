package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"relay/internal/envelope"
	"relay/internal/hook"
	"relay/internal/ledger"
	"relay/internal/schema"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// Admitter is what the machine needs of schema admission.
type Admitter interface {
	Admit(ctx context.Context, value []byte) (schema.Admitted, error)
	Encode(rec map[string]any) ([]byte, error)
}

// Rules checks a decoded record.
type Rules interface {
	Check(ctx context.Context, rec map[string]any) error
}

// Hook calls the optional HTTP hook.
type Hook interface {
	Call(ctx context.Context, req *hook.Request) (map[string]any, error)
}

// Outcomes counts what becomes of records. The machine reports outcomes
// of a transaction only once it committed (see OnCommit).
type Outcomes interface {
	// Outcome: n records reached outcome, with code ("" when processed).
	Outcome(outcome ledger.Outcome, code string, n int)
	// Ended: a record that had failed at least once reached an end state
	// (processed, quarantined, rejected) after attempts, elapsed since it
	// first failed.
	Ended(outcome ledger.Outcome, attempts int, elapsed time.Duration)
	// Replayed: n replayed records reached a ledger outcome: a state
	// (resolved, failed-again) or ledger.OutcomeDuplicate.
	Replayed(outcome string, n int)
}

// Machine is the failure state machine; it implements txn.Handler.
type Machine struct {
	Table    *Table
	Group    string
	Policy   tiers.Policy
	Admitter Admitter // nil: values are not checked (no schema registry)
	Rules    Rules    // nil: no rules
	Hook     Hook     // nil: no hook
	Redactor *envelope.Redactor
	Compat   envelope.Compat
	Outcomes Outcomes
	Log      *slog.Logger
	Now      Clock
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
	// settled already (set with StateTopic).
	Settled *ledger.Settled
	// Discards, when set, says at a replayed record's turn whether its
	// failure was discarded since the ledger was restored.
	Discards Discards
	// LoadState reads the committed records of state-topic partitions
	// (key → latest value); OnAssigned restores blocked keys and settled
	// failures from it.
	LoadState func(ctx context.Context, partitions []int32) (map[string][]byte, error)

	pending pending // what the open transaction will have done
	loaded  map[int32]bool
	waits   waits     // the records partitions wait for (WaitInPlace)
	stale   staleKeys // key states to delete while key ordering is off
}

// pending is what the open transaction did, reported once it commits.
type pending struct {
	outcomes map[outcomeCode]int
	replays  map[string]int
	ended    []ended
}

// outcomeCode is an outcome with its code, as Outcomes counts them.
type outcomeCode struct {
	outcome ledger.Outcome
	code    string
}

type ended struct {
	outcome  ledger.Outcome
	attempts int
	elapsed  time.Duration
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
	st        tiers.State
	keyed     bool
	kr        keyedRecord
}

// Handle implements txn.Handler.
func (m *Machine) Handle(ctx context.Context, rec *txn.Record) ([]txn.Output, error) {
	outs, err := m.handle(ctx, rec)
	if err == nil {
		// The record reached its next state in the open transaction:
		// once that commits, no wait at or before it is needed.
		m.waits.resolved(partKey{rec.Topic, rec.Partition}, rec.Offset)
		outs = append(outs, m.stale.tombstones(m.StateTopic, rec.Partition)...)
	}
	return outs, err
}

func (m *Machine) handle(ctx context.Context, rec *txn.Record) ([]txn.Output, error) {
	origin, ok := m.Table.Of(rec.Topic)
	if !ok {
		return nil, fmt.Errorf("record from %s, a topic relay does not route", rec.Topic)
	}
	p, outs, err := m.arrive(rec, origin)
	if p == nil {
		return outs, err
	}
	if outs, done := m.queue(p); done {
		return outs, nil
	}
	// A copy of a replayed record whose failure is settled already is not
	// handled again; at its key's turn it lets the next record go.
	if p.prev != nil && p.prev.ReplayCount > 0 && m.Settled != nil {
		if state, done := m.Settled.Check(p.id, p.prev.ReplayCount); done {
			return m.release(p, m.duplicate(p.rec, p.prev, state)), nil
		}
	}
	if outs, done, err := m.discardedReplay(ctx, p.rec, p.prev, p.keyed, p.kr); done {
		return outs, err
	}
	if p.keyed && p.kr.state != nil && p.kr.state.Held {
		outs := m.terminal(p.rec, p.origin, p.prev, p.id, p.st, tiers.Decision{Kind: tiers.Quarantine, Class: tiers.Ordering, Code: CodeKeyHeld},
			errors.New("held: an earlier record of its key was quarantined (ordering hold)"), schema.Info{})
		return m.release(p, withSeq(outs, p.kr.seq)), nil
	}
	if w := m.waits.get(partKey{rec.Topic, rec.Partition}, rec.Offset); w != nil {
		if p.now.Before(w.until) {
			// Back early (a rewind after an abort resumed the
			// partition): it still waits.
			return nil, &txn.NotDueError{Until: w.until}
		}
		// The record this partition waited for, again.
		p.st = w.st
		p.st.Attempt++
	}
	return m.try(ctx, p)
}

// try attempts the record, retrying in place as the policy says, until it
// is processed or decided otherwise.
func (m *Machine) try(ctx context.Context, p *pass) ([]txn.Output, error) {
	for {
		out, info, err := m.attempt(ctx, p.rec, p.origin, p.id, p.srcOffset)
		if err == nil {
			return m.processed(p, out, info), nil
		}
		if ctx.Err() != nil {
			// Shutting down: the record stays where it is.
			return nil, ctx.Err()
		}
		now := m.Now()
		d := m.Policy.Decide(err, p.st, now)
		if d.Kind == tiers.RetryTier && m.WaitInPlace {
			return nil, m.waitHere(p, d, now, err)
		}
		if d.Kind != tiers.RetryInPlace {
			outs := m.terminal(p.rec, p.origin, p.prev, p.id, p.st, d, err, info)
			if p.keyed {
				outs = m.keyedOutcome(p.rec, p.kr, d, p.id, outs)
			}
			return outs, nil
		}
		m.Log.Debug("retrying in place", "id", p.id, "code", d.Code, "attempt", p.st.Attempt, "in", d.Delay)
		t := time.NewTimer(d.Delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		p.st.Attempt++
		p.st.InPlace++
	}
}

// processed is the output of a record that passed, with what it settles:
// a replay's ledger change, its key's turn.
func (m *Machine) processed(p *pass, out txn.Output, info schema.Info) []txn.Output {
	m.count(ledger.OutcomeProcessed, "")
	outs := []txn.Output{out}
	if p.st.Attempt > 1 || p.origin.Tier >= 0 {
		m.end(ledger.OutcomeProcessed, p.st) // it had failed in this pass
	}
	if p.prev != nil && p.prev.ReplayCount > 0 {
		outs[0].Headers = append(outs[0].Headers, replayHeaders(p.prev)...)
		outs = append(outs, m.replayOutcome(p.rec, p.prev, p.st, ledger.Resolved, ledger.OutcomeProcessed, "", info)...)
	}
	return m.release(p, outs)
}

// release lets the next record of p's key go when p held its key's turn.
func (m *Machine) release(p *pass, outs []txn.Output) []txn.Output {
	if !p.keyed || p.kr.state == nil {
		return outs
	}
	return append(outs, m.Keys.put(p.kr.sk, p.rec.Partition, advance(p.kr.state)))
}

// keyedOutcome updates the key's state for a record that failed at its
// turn (or of a free key): a tier hop makes (or keeps) the key blocked with
// this record as its head; a terminal state lets the next record go, or,
// with Hold and a quarantine, holds the rest.
func (m *Machine) keyedOutcome(rec *txn.Record, kr keyedRecord, d tiers.Decision, id string, outs []txn.Output) []txn.Output {
	switch d.Kind {
	case tiers.RetryTier:
		ns := &keyState{Next: 0, Tail: 1}
		if kr.state != nil {
			c := *kr.state
			ns = &c
		}
		ns.Tier, ns.NotBefore, ns.Head = d.Tier, m.Now().Add(d.Delay), id
		return append(withSeq(outs, ns.Next), m.Keys.put(kr.sk, rec.Partition, ns))
	default:
		if kr.state == nil {
			return outs // a free key: nothing follows it
		}
		ns := advance(kr.state)
		if ns != nil && d.Kind == tiers.Quarantine && m.Keys.Hold {
			ns.Held = true
		}
		return append(withSeq(outs, kr.seq), m.Keys.put(kr.sk, rec.Partition, ns))
	}
}

// advance resolves the record at the head of a key's queue; nil when
// nothing of the key is outstanding any more.
func advance(ks *keyState) *keyState {
	ns := *ks
	ns.Next++
	ns.Head = ""
	if ns.Next >= ns.Tail {
		return nil
	}
	return &ns
}

// CodeEnvelopeInvalid quarantines a tier or replay record whose failure
// envelope cannot be read.
const CodeEnvelopeInvalid = "ENVELOPE_INVALID"

// attempt runs admission, rules and the hook once.
func (m *Machine) attempt(ctx context.Context, rec *txn.Record, origin Origin, id string, srcOffset int64) (txn.Output, schema.Info, error) {
	value := rec.Value
	var info schema.Info
	if m.Admitter != nil {
		a, err := m.Admitter.Admit(ctx, rec.Value)
		info = a.Writer
		if err != nil {
			return txn.Output{}, info, err
		}
		value = a.Value
		if m.Rules != nil {
			if err := m.Rules.Check(ctx, a.Record); err != nil {
				return txn.Output{}, info, err
			}
		}
		if m.Hook != nil {
			repl, err := m.Hook.Call(ctx, &hook.Request{
				MessageID: id, Topic: origin.Routes.Source, Partition: rec.Partition, Offset: srcOffset,
				Key: keyString(rec.Key), Record: a.Record,
			})
			if err != nil {
				return txn.Output{}, info, err
			}
			if repl != nil {
				if value, err = m.Admitter.Encode(repl); err != nil {
					// The hook answered with a record the canonical
					// schema cannot hold: the hook's fault, not a
					// transient one.
					return txn.Output{}, info, tiers.Failf(tiers.CauseHookUnexpected, "replacement record does not fit the canonical schema: %v", err)
				}
			}
		}
	}
	// Room for the message id and the trace context.
	headers := envelope.StripWithRoom(rec.Headers, 3)
	headers = append(headers, txn.Header{Key: envelope.MessageID, Value: []byte(id)})
	headers = appendTrace(headers, rec.Headers)
	return txn.Output{
		Topic: origin.Routes.Output, Partition: rec.Partition, Key: rec.Key, Value: value,
		Headers: headers, Timestamp: rec.Timestamp,
	}, info, nil
}
