package pipeline

import (
	"encoding/base64"
	"strconv"
	"time"
	"unicode/utf8"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/schema"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// terminal builds the record of a decision other than an in-place retry:
// the next tier, quarantine or rejected. It keeps the original key, value,
// headers and timestamp, and adds the envelope.
func (m *Machine) terminal(rec *txn.Record, origin Origin, prev *envelope.Failure, id string, st tiers.State, d tiers.Decision, cause error, info schema.Info) []txn.Output {
	now := m.Now()
	f := m.failureOf(rec, origin, prev, id)
	f.Attempt, f.FirstFailedAt, f.LastFailedAt = st.Attempt, st.FirstFailedAt, now
	f.Class, f.Code, f.Message = d.Class.String(), d.Code, m.Redactor.Redact(cause.Error())
	f.SchemaID, f.SchemaSubject, f.SchemaVersion = info.ID, info.Subject, info.Version
	var topic string
	var outcome ledger.Outcome
	switch d.Kind {
	case tiers.RetryTier:
		topic, outcome = origin.Routes.Tiers[d.Tier], ledger.OutcomeRetry
		f.NotBefore = now.Add(d.Delay)
	case tiers.Reject:
		topic, outcome = origin.Routes.Rejected, ledger.OutcomeRejected
	default:
		topic, outcome = origin.Routes.Quarantine, ledger.OutcomeQuarantined
	}
	m.count(outcome, d.Code)
	m.Log.Info("record failed", "id", id, "outcome", outcome, "code", d.Code, "class", f.Class, "attempt", f.Attempt, "topic", topic, "error", f.Message)
	if d.Kind == tiers.RetryTier {
		return []txn.Output{tierHop(rec, topic, f, m.Compat.Headers(f), now)}
	}
	outs := []txn.Output{hop(rec, topic, f, m.Compat.Headers(f))}
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
func (m *Machine) replayOutcome(rec *txn.Record, prev *envelope.Failure, st tiers.State, state ledger.State, outcome ledger.Outcome, code string, info schema.Info) []txn.Output {
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
	m.replayed(string(state))
	return []txn.Output{m.ledgerOutput(e)}
}

// duplicate settles a copy of a replayed record whose failure is settled
// already: nothing is output; the ledger says so, and it is counted.
func (m *Machine) duplicate(rec *txn.Record, prev *envelope.Failure, state ledger.State) []txn.Output {
	m.Log.Warn("replayed record already settled; not output again", "id", prev.ID, "state", state,
		"replay_id", prev.ReplayID, "replay_count", prev.ReplayCount, "topic", rec.Topic, "offset", rec.Offset)
	m.replayed(string(ledger.OutcomeDuplicate))
	if m.StateTopic == "" {
		return nil
	}
	e := &ledger.Event{
		ID: prev.ID, State: state, At: m.Now(), Actor: m.Actor, Outcome: ledger.OutcomeDuplicate,
		Reason:   "copy of replay " + prev.ReplayID + " skipped: the failure is " + string(state) + " already",
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

// tierHop is rec's next record in tier topic. Its timestamp is the hop's
// time (now), so the tier's retention counts from when the record entered
// the tier, not from the source's time, however old the backlog; the
// record's own timestamp travels in the envelope (relay.record.timestamp)
// and is what its output, quarantine or rejected record keeps.
func tierHop(rec *txn.Record, topic string, f *envelope.Failure, extra []envelope.Header, now time.Time) txn.Output {
	f.RecordTimestamp = rec.Timestamp
	out := hop(rec, topic, f, extra)
	out.Timestamp = now
	return out
}

// maxEnvelopeHeaders is the most headers a failure envelope has.
const maxEnvelopeHeaders = 20

// hop is rec's next record in topic: its original key, value, headers and
// timestamp, relay's old headers replaced by envelope f (and extra), and
// the trace context carried.
func hop(rec *txn.Record, topic string, f *envelope.Failure, extra []envelope.Header) txn.Output {
	// Room for the envelope, the trace context and a key's place.
	headers := envelope.StripWithRoom(rec.Headers, maxEnvelopeHeaders+len(extra)+3)
	headers = envelope.AppendFailure(headers, f)
	headers = envelope.Append(headers, extra)
	headers = appendTrace(headers, rec.Headers)
	return txn.Output{
		Topic: topic, Partition: rec.Partition, Key: rec.Key, Value: rec.Value,
		Headers: headers, Timestamp: rec.Timestamp,
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
