package pipeline

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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
	// Discards, when set, says at a replayed record's turn whether its
	// failure was discarded since the ledger was restored.
	Discards Discards
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
	if outs, done, err := m.discardedReplay(ctx, rec, prev, keyed, kr); done {
		return outs, err
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
	outs := []txn.Output{hop(rec, topic, f, m.Compat.Headers(f))}
	if d.Kind == tiers.RetryTier {
		return outs
	}
	if st.Attempt > 1 || origin.Tier >= 0 {
		m.end(outcome, st) // it had failed before in this pass
	}
	switch {
	case f.ReplayCount > 0 && d.Kind == tiers.Reject:
		outs = append(outs, m.replayOutcome(rec, prev, st, ledger.Resolved, ledger.OutcomeRejected, d.Code, info)...)
	case f.ReplayCount > 0:
		outs = append(outs, m.replayOutcome(rec, prev, st, ledger.FailedAgain, "", d.Code, info)...)
	case d.Kind == tiers.Quarantine && m.StateTopic != "":
		e := &ledger.Event{
			ID: id, State: ledger.Open, At: now, Actor: m.Actor, Reason: "quarantined by relay: " + d.Code,
			Code: d.Code, Attempt: f.Attempt, FirstFailedAt: f.FirstFailedAt,
			Source:        ledger.SourceOf(f),
			SchemaVersion: f.SchemaVersion, Topic: topic, RecordTime: rec.Timestamp,
		}
		outs = append(outs, m.ledgerOutput(e))
	}
	return outs
}

// replayOutcome is the ledger record of a replayed record's end: resolved
// (processed or rejected) or failed-again. Nothing without a ledger.
func (m *Machine) replayOutcome(rec *txn.Record, prev *envelope.Failure, st tiers.State, state, outcome, code string, info schema.Info) []txn.Output {
	if m.StateTopic == "" {
		return nil
	}
	e := &ledger.Event{
		ID: prev.ID, State: state, At: m.Now(), Actor: m.Actor, Outcome: outcome, Code: code,
		Attempt: st.Attempt, FirstFailedAt: st.FirstFailedAt,
		ReplayID: prev.ReplayID, ReplayCount: prev.ReplayCount,
		Source:        ledger.SourceOf(prev),
		SchemaVersion: info.Version,
	}
	switch {
	case state == ledger.FailedAgain:
		e.Reason = "replay " + prev.ReplayID + " failed again: " + code
		// The record is quarantined again, in the same partition.
		e.Topic, e.RecordTime = m.Table.quarantineOf(prev.SourceTopic), rec.Timestamp
	case outcome == ledger.OutcomeRejected:
		e.Reason = "replay " + prev.ReplayID + " rejected: " + code
	default:
		e.Reason = "replay " + prev.ReplayID + " processed"
	}
	m.replayed(state)
	return []txn.Output{m.ledgerOutput(e)}
}

// duplicate settles a copy of a replayed record whose failure is settled
// already: nothing is output; the ledger says so, and it is counted.
func (m *Machine) duplicate(rec *txn.Record, prev *envelope.Failure, state string) []txn.Output {
	m.Log.Warn("replayed record already settled; not output again", "id", prev.ID, "state", state,
		"replay_id", prev.ReplayID, "replay_count", prev.ReplayCount, "topic", rec.Topic, "offset", rec.Offset)
	m.replayed(ledger.OutcomeDuplicate)
	if m.StateTopic == "" {
		return nil
	}
	e := &ledger.Event{
		ID: prev.ID, State: state, At: m.Now(), Actor: m.Actor, Outcome: ledger.OutcomeDuplicate,
		Reason:   "copy of replay " + prev.ReplayID + " skipped: the failure is " + state + " already",
		ReplayID: prev.ReplayID, ReplayCount: prev.ReplayCount,
		Source: ledger.SourceOf(prev),
	}
	return []txn.Output{m.ledgerOutput(e)}
}

// ledgerOutput is the state-topic record of ledger change e, noted (when it
// settles the failure) for the open transaction.
func (m *Machine) ledgerOutput(e *ledger.Event) txn.Output {
	if m.Settled != nil {
		m.Settled.Record(e)
	}
	return txn.Output{Topic: m.StateTopic, Partition: e.Partition(), Key: []byte(e.Key()), Value: e.Value()}
}

// replayHeaders mark an output as a replay of its failure: the identity
// stays relay.message.id.
func replayHeaders(f *envelope.Failure) []txn.Header {
	return []txn.Header{
		{Key: envelope.ReplayID, Value: []byte(f.ReplayID)},
		{Key: envelope.ReplayCount, Value: []byte(strconv.Itoa(f.ReplayCount))},
	}
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
	if m.pending.outcomes == nil {
		m.pending.outcomes = map[[2]string]int{}
	}
	m.pending.outcomes[[2]string{outcome, code}]++
}

func (m *Machine) replayed(outcome string) {
	if m.pending.replays == nil {
		m.pending.replays = map[string]int{}
	}
	m.pending.replays[outcome]++
}

// end notes a record that had failed and reached an end state.
func (m *Machine) end(outcome string, st tiers.State) {
	m.pending.ended = append(m.pending.ended, ended{outcome, st.Attempt, m.Now().Sub(st.FirstFailedAt)})
}

func (m *Machine) forget() {
	clear(m.pending.outcomes)
	clear(m.pending.replays)
	m.pending.ended = m.pending.ended[:0]
}

// OnCommit reports the outcomes of the committed transaction.
func (m *Machine) OnCommit() {
	if m.Keys != nil {
		m.Keys.commit()
	}
	if m.Settled != nil {
		m.Settled.Commit()
	}
	if m.Outcomes != nil {
		for k, n := range m.pending.outcomes {
			m.Outcomes.Outcome(k[0], k[1], n)
		}
		for k, n := range m.pending.replays {
			m.Outcomes.Replayed(k, n)
		}
		for _, e := range m.pending.ended {
			m.Outcomes.Ended(e.outcome, e.attempts, e.elapsed)
		}
	}
	m.forget()
}

// OnAbort forgets the outcomes of the aborted transaction: its records
// will be handled again.
func (m *Machine) OnAbort() {
	m.forget()
	if m.Keys != nil {
		m.Keys.abort()
	}
	if m.Settled != nil {
		m.Settled.Abort()
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

// OnAssigned implements txn.PartitionListener: the blocked keys (key
// ordering) and the settled failures (ledger) of the partitions are
// restored from the state topic before their records are handled.
func (m *Machine) OnAssigned(ctx context.Context, partitions []int32) error {
	if (m.Keys == nil && m.Settled == nil) || m.LoadState == nil {
		return nil
	}
	if m.loaded == nil {
		m.loaded = map[int32]bool{}
	}
	var todo []int32
	for _, p := range partitions {
		if !m.loaded[p] {
			todo = append(todo, p)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	entries, err := m.LoadState(ctx, todo)
	if err != nil {
		return fmt.Errorf("restore state of partitions %v from %s: %w", todo, m.StateTopic, err)
	}
	if m.Keys != nil {
		if err := m.Keys.Restore(entries); err != nil {
			return err
		}
	}
	if m.Settled != nil {
		for _, err := range m.Settled.Restore(entries) {
			m.Log.Warn("unreadable ledger record skipped", "topic", m.StateTopic, "err", err)
		}
	}
	for _, p := range todo {
		m.loaded[p] = true
	}
	m.Log.Info("state restored", "partitions", todo, "blocked_keys", m.blocked(), "settled_failures", m.settled())
	return nil
}

func (m *Machine) blocked() int {
	if m.Keys == nil {
		return 0
	}
	return m.Keys.Blocked()
}

func (m *Machine) settled() int {
	if m.Settled == nil {
		return 0
	}
	return m.Settled.Len()
}

// OnRevoked implements txn.PartitionListener.
func (m *Machine) OnRevoked(partitions []int32) {
	if m.Keys != nil {
		m.Keys.Forget(partitions)
	}
	if m.Settled != nil {
		m.Settled.Forget(partitions)
	}
	for _, p := range partitions {
		delete(m.loaded, p)
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
