package pipeline

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

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
	Outcome(outcome, code string, n int)
	// Ended: a record that had failed at least once reached an end state
	// (processed, quarantined, rejected) after attempts, elapsed since it
	// first failed.
	Ended(outcome string, attempts int, elapsed time.Duration)
	// Replayed: n replayed records reached a ledger outcome (resolved,
	// failed-again, duplicate).
	Replayed(outcome string, n int)
}

// Outcome names, as metrics and the demo show them.
const (
	OutcomeProcessed   = "processed"
	OutcomeRetry       = "retry"
	OutcomeQuarantined = "quarantined"
	OutcomeRejected    = "rejected"
)

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
	// LoadState reads the committed records of state-topic partitions
	// (key → latest value); OnAssigned restores blocked keys and settled
	// failures from it.
	LoadState func(ctx context.Context, partitions []int32) (map[string][]byte, error)

	pending pending // what the open transaction will have done
	loaded  map[int32]bool
	// waiting is the retry state of the record each partition waits for
	// (WaitInPlace): one entry per partition at most.
	waiting map[partKey]*waitState
}

// pending is what the open transaction did, reported once it commits.
type pending struct {
	outcomes map[[2]string]int
	replays  map[string]int
	ended    []ended
}

type ended struct {
	outcome  string
	attempts int
	elapsed  time.Duration
}

type partKey struct {
	topic     string
	partition int32
}

type waitState struct {
	offset int64
	until  time.Time
	st     tiers.State
}

// Handle implements txn.Handler.
func (m *Machine) Handle(ctx context.Context, rec *txn.Record) ([]txn.Output, error) {
	origin, ok := m.Table.Of(rec.Topic)
	if !ok {
		return nil, fmt.Errorf("record from %s, a topic relay does not route", rec.Topic)
	}
	now := m.Now()
	st := tiers.State{Attempt: 1, FirstFailedAt: now, AtSource: origin.Tier < 0, Tier: origin.Tier}
	var prev *envelope.Failure
	id := envelope.ID(rec.Topic, rec.Partition, rec.Offset)
	srcOffset := rec.Offset
	if origin.Replay {
		f, err := envelope.Parse(rec.Headers)
		if err == nil && (f.ReplayCount < 1 || f.ReplayID == "") {
			err = errors.New("no relay.replay.id and relay.replay.count: not published by relay replay")
		}
		if err != nil {
			return m.terminal(rec, origin, nil, id, st, tiers.Decision{Kind: tiers.Quarantine, Class: tiers.Invalid, Code: CodeEnvelopeInvalid},
				fmt.Errorf("replay record without a readable envelope: %w", err), schema.Info{}), nil
		}
		// A replay is a new pass with the record's own identity and a
		// fresh budget; the ledger keeps the history of earlier passes.
		prev = &envelope.Failure{
			ID: f.ID, SourceTopic: f.SourceTopic, SourcePartition: f.SourcePartition, SourceOffset: f.SourceOffset,
			SourceTimestamp: f.SourceTimestamp, ReplayID: f.ReplayID, ReplayCount: f.ReplayCount,
		}
		id, srcOffset = f.ID, f.SourceOffset
	}
	if origin.Tier >= 0 {
		f, err := envelope.Parse(rec.Headers)
		if err != nil {
			// Someone else wrote to a tier topic, or the headers were
			// damaged: relay cannot tell the record's history.
			return m.terminal(rec, origin, nil, id, st, tiers.Decision{Kind: tiers.Quarantine, Class: tiers.Invalid, Code: CodeEnvelopeInvalid},
				fmt.Errorf("tier record without a readable envelope: %w", err), schema.Info{}), nil
		}
		if now.Before(f.NotBefore) {
			return nil, &txn.NotDueError{Until: f.NotBefore}
		}
		prev, id, srcOffset = f, f.ID, f.SourceOffset
		if !f.RecordTimestamp.IsZero() {
			// A tier record's own timestamp is its hop's time; from
			// here on, the record has the one it entered relay with.
			r := *rec
			r.Timestamp = f.RecordTimestamp
			rec = &r
		}
		st.Attempt, st.FirstFailedAt = f.Attempt+1, f.FirstFailedAt
		if f.Code == CodeKeyBlocked {
			// It only waited behind its key: this is its first pass,
			// with in-place retries and then the first tier, and its
			// own budget starts now.
			st.FirstFailedAt, st.AtSource = now, true
		}
	}
	keyed := m.Keys != nil && rec.Key != nil && len(origin.Routes.Tiers) > 0
	var kr keyedRecord
	if keyed {
		kr = keyedRecord{sk: stateKey(origin.Routes.Source, rec.Partition, rec.Key), seq: -1}
		kr.state = m.Keys.get(kr.sk)
		if origin.Tier >= 0 {
			kr.seq = keySeq(rec.Headers)
		}
		if kr.state != nil {
			switch {
			case origin.Tier < 0 || kr.seq < 0:
				// A new record of a blocked key joins its queue.
				seq, ns := kr.state.Tail, *kr.state
				ns.Tail++
				return append(m.follow(rec, origin, prev, id, st, kr, seq), m.Keys.put(kr.sk, rec.Partition, &ns)), nil
			case kr.seq != kr.state.Next:
				// Not its turn: back behind the head.
				return m.follow(rec, origin, prev, id, st, kr, kr.seq), nil
			}
		}
	}
	// A copy of a replayed record whose failure is settled already is not
	// handled again; at its key's turn it lets the next record go.
	if prev != nil && prev.ReplayCount > 0 && m.Settled != nil {
		if state, done := m.Settled.Check(id, prev.ReplayCount); done {
			outs := m.duplicate(rec, prev, state)
			if keyed && kr.state != nil {
				outs = append(outs, m.Keys.put(kr.sk, rec.Partition, advance(kr.state)))
			}
			return outs, nil
		}
	}
	if keyed && kr.state != nil && kr.state.Held {
		outs := m.terminal(rec, origin, prev, id, st, tiers.Decision{Kind: tiers.Quarantine, Class: tiers.Ordering, Code: CodeKeyHeld},
			errors.New("held: an earlier record of its key was quarantined (ordering hold)"), schema.Info{})
		return append(withSeq(outs, kr.seq), m.Keys.put(kr.sk, rec.Partition, advance(kr.state))), nil
	}
	pk := partKey{rec.Topic, rec.Partition}
	if w, ok := m.waiting[pk]; ok {
		if w.offset == rec.Offset {
			if now.Before(w.until) {
				// Back early (a rewind after an abort resumed the
				// partition): it still waits.
				return nil, &txn.NotDueError{Until: w.until}
			}
			// The record this partition waited for, again.
			st = w.st
			st.Attempt++
		}
		delete(m.waiting, pk)
	}
	for {
		out, info, err := m.attempt(ctx, rec, origin, id, srcOffset)
		if err == nil {
			m.count(OutcomeProcessed, "")
			outs := []txn.Output{out}
			if st.Attempt > 1 || origin.Tier >= 0 {
				m.end(OutcomeProcessed, st) // it had failed in this pass
			}
			if prev != nil && prev.ReplayCount > 0 {
				outs[0].Headers = append(outs[0].Headers, replayHeaders(prev)...)
				outs = append(outs, m.replayOutcome(rec, prev, st, ledger.Resolved, ledger.OutcomeProcessed, "", info)...)
			}
			if keyed && kr.state != nil {
				outs = append(outs, m.Keys.put(kr.sk, rec.Partition, advance(kr.state)))
			}
			return outs, nil
		}
		if ctx.Err() != nil {
			// Shutting down: the record stays where it is.
			return nil, ctx.Err()
		}
		now = m.Now()
		d := m.Policy.Decide(err, st, now)
		if d.Kind == tiers.RetryTier && m.WaitInPlace {
			// Wait here, not in a tier: the partition is paused and
			// nothing after this record is committed until it is done.
			next := st
			next.AtSource, next.Tier, next.InPlace = false, d.Tier, 0
			if m.waiting == nil {
				m.waiting = map[partKey]*waitState{}
			}
			m.waiting[pk] = &waitState{offset: rec.Offset, until: now.Add(d.Delay), st: next}
			m.Log.Info("record failed; its partition waits for it", "id", id, "code", d.Code, "attempt", st.Attempt,
				"until", now.Add(d.Delay), "error", m.Redactor.Redact(err.Error()))
			return nil, &txn.NotDueError{Until: now.Add(d.Delay)}
		}
		if d.Kind != tiers.RetryInPlace {
			outs := m.terminal(rec, origin, prev, id, st, d, err, info)
			if keyed {
				outs = m.keyedOutcome(rec, kr, d, id, outs)
			}
			return outs, nil
		}
		m.Log.Debug("retrying in place", "id", id, "code", d.Code, "attempt", st.Attempt, "in", d.Delay)
		t := time.NewTimer(d.Delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		st.Attempt++
		st.InPlace++
	}
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
	headers := envelope.Strip(rec.Headers)
	headers = append(headers, txn.Header{Key: envelope.MessageID, Value: []byte(id)})
	headers = appendTrace(headers, rec.Headers)
	return txn.Output{
		Topic: origin.Routes.Output, Partition: rec.Partition, Key: rec.Key, Value: value,
		Headers: headers, Timestamp: rec.Timestamp,
	}, info, nil
}

// keyString renders a key for the hook's JSON: text as is, other bytes in
// base64, no key as null.
func keyString(k []byte) *string {
	if k == nil {
		return nil
	}
	s := string(k)
	if !utf8.ValidString(s) {
		s = base64.StdEncoding.EncodeToString(k)
	}
	return &s
}

// appendTrace carries the record's W3C trace context to its next hop.
func appendTrace(dst, src []txn.Header) []txn.Header {
	for _, k := range []string{envelope.TraceParent, envelope.TraceState} {
		if v, ok := envelope.Lookup(src, k); ok {
			dst = append(dst, txn.Header{Key: k, Value: v})
		}
	}
	return dst
}
