package pipeline

import (
	"errors"
	"strconv"
	"time"

	"relay/internal/envelope"
	"relay/internal/txn"
)

// This file builds the records of a pass's next state: its output, a tier
// record (a hop: the record will be tried again), and a terminal record
// (quarantine or rejected). Deciding which, and what that settles, is
// outcome.go's.

// outputRecord is the output of a record that passed: its value as
// admitted, its original key, headers and timestamp, and its identity.
func outputRecord(p *pass, value []byte) txn.Output {
	// Room for the message id and the trace context.
	headers := envelope.StripWithRoom(p.rec.Headers, 4)
	headers = append(headers, txn.Header{Key: envelope.MessageID, Value: []byte(p.id)}, txn.Header{Key: envelope.SourceFingerprint, Value: []byte(p.fp)})
	headers = appendTrace(headers, p, p.origin.Routes.Output, p.rec.Partition)
	return txn.Output{
		Topic: p.origin.Routes.Output, Partition: p.rec.Partition, Key: p.rec.Key, Value: value,
		Headers: headers, Timestamp: p.rec.Timestamp,
	}
}

// envelopeOf starts the envelope of p's record: its identity and where it
// first appeared, taken from its earlier envelope when it has one.
func (m *Machine) envelopeOf(p *pass) *envelope.Failure {
	rec := p.rec
	f := &envelope.Failure{
		ID: p.id, SourceTopic: p.origin.Routes.Source, SourcePartition: rec.Partition, SourceOffset: rec.Offset,
		SourceTimestamp: rec.Timestamp, Fingerprint: p.fp, ConsumerGroup: m.group,
	}
	if prev := p.prev; prev != nil {
		f.SourceTopic, f.SourcePartition, f.SourceOffset = prev.SourceTopic, prev.SourcePartition, prev.SourceOffset
		f.ReplayID, f.ReplayCount = prev.ReplayID, prev.ReplayCount
		if !prev.SourceTimestamp.IsZero() {
			f.SourceTimestamp = prev.SourceTimestamp
		}
	}
	return f
}

// failureOf is the envelope of p's record failed as v, at now.
func (m *Machine) failureOf(p *pass, v verdict, now time.Time) *envelope.Failure {
	f := m.envelopeOf(p)
	f.Attempt, f.FirstFailedAt, f.LastFailedAt = p.st.Attempt, p.st.FirstFailedAt, now
	f.Class, f.Code, f.Message = v.Class.String(), v.Code, m.redactor.Redact(v.cause.Error())
	if m.compat.Connect {
		f.Causes = causes(v.cause, m.redactor)
	}
	f.SchemaID, f.SchemaSubject, f.SchemaVersion = v.info.ID, v.info.Subject, v.info.Version
	return f
}

// maxCauses bounds the cause chain written in Connect's stack trace.
const maxCauses = 8

// causes is err's chain below err itself (each error its first wraps),
// redacted, at most maxCauses deep.
func causes(err error, r *envelope.Redactor) []string {
	var out []string
	for e := unwrap(err); e != nil && len(out) < maxCauses; e = unwrap(e) {
		out = append(out, r.Redact(e.Error()))
	}
	return out
}

// unwrap is the error e wraps; of several (errors.Join), the first.
func unwrap(e error) error {
	if u := errors.Unwrap(e); u != nil {
		return u
	}
	if u, ok := e.(interface{ Unwrap() []error }); ok { //nolint:errorlint // the chain is walked one level at a time, not searched
		if es := u.Unwrap(); len(es) > 0 {
			return es[0]
		}
	}
	return nil
}

// tierRecord is p's next record in tier topic. Its timestamp is the
// hop's time (now), so the tier's retention counts from when the record
// entered the tier, not from the source's time, however old the backlog;
// the record's own timestamp travels in the envelope
// (relay.record.timestamp) and is what its output, quarantine or rejected
// record keeps.
func tierRecord(p *pass, topic string, f *envelope.Failure, extra []envelope.Header, now time.Time) txn.Output {
	f.RecordTimestamp = p.rec.Timestamp
	out := terminalRecord(p, topic, f, extra)
	out.Timestamp = now
	return out
}

// maxEnvelopeHeaders is the most headers a failure envelope has.
const maxEnvelopeHeaders = 21

// terminalRecord is p's record in topic (quarantine or rejected, and the
// base of a tier record): its original key, value, headers and timestamp,
// relay's old headers replaced by envelope f (and extra), and the trace
// context carried on.
func terminalRecord(p *pass, topic string, f *envelope.Failure, extra []envelope.Header) txn.Output {
	rec := p.rec
	// Room for the envelope, the trace context and a key's place.
	headers := envelope.StripWithRoom(rec.Headers, maxEnvelopeHeaders+len(extra)+3)
	headers = envelope.AppendFailure(headers, f)
	headers = envelope.Append(headers, extra)
	headers = appendTrace(headers, p, topic, rec.Partition)
	return txn.Output{
		Topic: topic, Partition: rec.Partition, Key: rec.Key, Value: rec.Value,
		Headers: headers, Timestamp: rec.Timestamp,
	}
}

// replayHeaders mark an output as a replay of its failure: the identity
// stays relay.message.id.
func replayHeaders(f *envelope.Failure) []txn.Header {
	return []txn.Header{
		{Key: envelope.ReplayID, Value: []byte(f.ReplayID)},
		{Key: envelope.ReplayCount, Value: []byte(strconv.Itoa(f.ReplayCount))},
	}
}
