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
	Outcome(outcome, code string, n int)
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

	pending map[[2]string]int // outcomes of the open transaction
	// waiting is the retry state of the record each partition waits for
	// (WaitInPlace): one entry per partition at most.
	waiting map[partKey]*waitState
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
			case kr.state.Held:
				outs := m.terminal(rec, origin, prev, id, st, tiers.Decision{Kind: tiers.Quarantine, Class: tiers.Ordering, Code: CodeKeyHeld},
					errors.New("held: an earlier record of its key was quarantined (ordering hold)"), schema.Info{})
				return append(withSeq(outs, kr.seq), m.Keys.put(kr.sk, rec.Partition, advance(kr.state))), nil
			}
		}
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
			if keyed && kr.state != nil {
				return []txn.Output{out, m.Keys.put(kr.sk, rec.Partition, advance(kr.state))}, nil
			}
			return []txn.Output{out}, nil
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

// terminal builds the record of a decision other than an in-place retry:
// the next tier, quarantine or rejected. It keeps the original key, value,
// headers and timestamp, and adds the envelope.
func (m *Machine) terminal(rec *txn.Record, origin Origin, prev *envelope.Failure, id string, st tiers.State, d tiers.Decision, cause error, info schema.Info) []txn.Output {
	now := m.Now()
	f := m.failureOf(rec, origin, prev, id)
	f.Attempt, f.FirstFailedAt, f.LastFailedAt = st.Attempt, st.FirstFailedAt, now
	f.Class, f.Code, f.Message = d.Class.String(), d.Code, m.Redactor.Redact(cause.Error())
	f.SchemaID, f.SchemaSubject, f.SchemaVersion = info.ID, info.Subject, info.Version
	var topic, outcome string
	switch d.Kind {
	case tiers.RetryTier:
		topic, outcome = origin.Routes.Tiers[d.Tier], OutcomeRetry
		f.NotBefore = now.Add(d.Delay)
	case tiers.Reject:
		topic, outcome = origin.Routes.Rejected, OutcomeRejected
	default:
		topic, outcome = origin.Routes.Quarantine, OutcomeQuarantined
	}
	m.count(outcome, d.Code)
	m.Log.Info("record failed", "id", id, "outcome", outcome, "code", d.Code, "class", f.Class, "attempt", f.Attempt, "topic", topic, "error", f.Message)
	return []txn.Output{hop(rec, topic, f, m.Compat.Headers(f))}
}

// failureOf starts the envelope of rec: its identity and where it first
// appeared, taken from its earlier envelope when it comes from a tier.
func (m *Machine) failureOf(rec *txn.Record, origin Origin, prev *envelope.Failure, id string) *envelope.Failure {
	f := &envelope.Failure{
		ID: id, SourceTopic: origin.Routes.Source, SourcePartition: rec.Partition, SourceOffset: rec.Offset,
		SourceTimestamp: rec.Timestamp, ConsumerGroup: m.Group,
	}
	if prev != nil {
		f.SourceTopic, f.SourcePartition, f.SourceOffset = prev.SourceTopic, prev.SourcePartition, prev.SourceOffset
		f.ReplayID, f.ReplayCount = prev.ReplayID, prev.ReplayCount
		if !prev.SourceTimestamp.IsZero() {
			f.SourceTimestamp = prev.SourceTimestamp
		}
	}
	return f
}

// hop is rec's next record in topic: its original key, value, headers and
// timestamp, relay's old headers replaced by envelope f (and extra), and
// the trace context carried.
func hop(rec *txn.Record, topic string, f *envelope.Failure, extra []txn.Header) txn.Output {
	headers := envelope.Strip(rec.Headers)
	headers = append(headers, f.Headers()...)
	headers = append(headers, extra...)
	headers = appendTrace(headers, rec.Headers)
	return txn.Output{
		Topic: topic, Partition: rec.Partition, Key: rec.Key, Value: rec.Value,
		Headers: headers, Timestamp: rec.Timestamp,
	}
}

func (m *Machine) count(outcome, code string) {
	if m.pending == nil {
		m.pending = map[[2]string]int{}
	}
	m.pending[[2]string{outcome, code}]++
}

// OnCommit reports the outcomes of the committed transaction.
func (m *Machine) OnCommit() {
	if m.Keys != nil {
		m.Keys.commit()
	}
	if m.Outcomes != nil {
		for k, n := range m.pending {
			m.Outcomes.Outcome(k[0], k[1], n)
		}
	}
	clear(m.pending)
}

// OnAbort forgets the outcomes of the aborted transaction: its records
// will be handled again.
func (m *Machine) OnAbort() {
	clear(m.pending)
	if m.Keys != nil {
		m.Keys.abort()
	}
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

// OnAssigned implements txn.PartitionListener: key ordering restores the
// blocked keys of the partitions before their records are handled.
func (m *Machine) OnAssigned(ctx context.Context, partitions []int32) error {
	if m.Keys == nil {
		return nil
	}
	if err := m.Keys.Restore(ctx, partitions); err != nil {
		return err
	}
	m.Log.Info("blocked keys restored", "partitions", partitions, "blocked_keys", m.Keys.Blocked())
	return nil
}

// OnRevoked implements txn.PartitionListener.
func (m *Machine) OnRevoked(partitions []int32) {
	if m.Keys != nil {
		m.Keys.Forget(partitions)
	}
	for pk := range m.waiting {
		for _, p := range partitions {
			if pk.partition == p {
				delete(m.waiting, pk)
			}
		}
	}
}

var (
	_ txn.Handler           = (*Machine)(nil)
	_ txn.PartitionListener = (*Machine)(nil)
	_ txn.TxnListener       = (*Machine)(nil)
)
