package pipeline

import (
	"errors"
	"fmt"

	"relay/internal/envelope"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// CodeEnvelopeInvalid quarantines a tier or replay record whose failure
// envelope cannot be read.
const CodeEnvelopeInvalid = "ENVELOPE_INVALID"

// identify starts the pass of rec: a tier or replay record brings its
// envelope. A record that is not due, or another group's, gives no pass
// (but an error for the one not due); bad says the record's envelope
// cannot be read (it is quarantined).
func (m *Machine) identify(rec *txn.Record, origin Origin) (p *pass, bad, notDue error) {
	now := m.now()
	p = &pass{rec: rec, origin: origin, now: now, id: envelope.ID(rec.Topic, rec.Partition, rec.Offset), srcOffset: rec.Offset,
		st: firstAttempt(origin, now)}
	switch {
	case origin.Replay:
		bad = fromReplay(p)
	case origin.Tier >= 0:
		if g, ok := envelope.Lookup(rec.Headers, envelope.ConsumerGroup); origin.Retired && ok && string(g) != m.group {
			// Another group's record, in a tier topic this group no
			// longer uses (two groups can share tier topic names): it
			// is that group's to handle.
			return nil, nil, nil
		}
		if bad, notDue = fromTier(p); notDue != nil {
			return nil, nil, notDue
		}
	}
	p.fp = fingerprintOf(p)
	return p, bad, nil
}

// fingerprintOf is the pass's source fingerprint: the one its envelope
// carries, else its record's own (a source record's, or a copy's written
// before relay kept fingerprints, whose key and value are the source's).
func fingerprintOf(p *pass) string {
	if p.prev != nil && p.prev.Fingerprint != "" {
		return p.prev.Fingerprint
	}
	return envelope.Fingerprint(p.rec.Key, p.rec.Value)
}

// unreadable quarantines a record whose envelope cannot be read, as why
// says: the record is decided, its pass ends here.
func (m *Machine) unreadable(p *pass, why error) []txn.Output {
	return m.toEnd(p, verdict{Decision: tiers.Decision{Kind: tiers.Quarantine, Class: tiers.Invalid, Code: CodeEnvelopeInvalid}, cause: why})
}

// fromReplay reads a replay record's envelope into p; an error says it has
// none that relay replay would have written.
func fromReplay(p *pass) error {
	f, err := envelope.Parse(p.rec.Headers)
	if err == nil && (f.ReplayCount < 1 || f.ReplayID == "") {
		err = errors.New("no relay.replay.id and relay.replay.count: not published by relay replay")
	}
	if err != nil {
		return fmt.Errorf("replay record without a readable envelope: %w", err)
	}
	// A replay is a new pass with the record's own identity and a fresh
	// budget; the ledger keeps the history of earlier passes.
	p.prev = &envelope.Failure{
		ID: f.ID, SourceTopic: f.SourceTopic, SourcePartition: f.SourcePartition, SourceOffset: f.SourceOffset,
		SourceTimestamp: f.SourceTimestamp, Fingerprint: f.Fingerprint, ReplayID: f.ReplayID, ReplayCount: f.ReplayCount,
	}
	p.id, p.srcOffset = f.ID, f.SourceOffset
	return nil
}

// fromTier reads a tier record's envelope into p: bad when it cannot be
// read, notDue when the record's next attempt is not due yet.
func fromTier(p *pass) (bad, notDue error) {
	f, err := envelope.Parse(p.rec.Headers)
	if err != nil {
		// Someone else wrote to a tier topic, or the headers were
		// damaged: relay cannot tell the record's history.
		return fmt.Errorf("tier record without a readable envelope: %w", err), nil
	}
	if p.now.Before(f.NotBefore) {
		return nil, &txn.NotDueError{Until: f.NotBefore}
	}
	p.prev, p.id, p.srcOffset = f, f.ID, f.SourceOffset
	if !f.RecordTimestamp.IsZero() {
		// A tier record's own timestamp is its hop's time; from here on,
		// the record has the one it entered relay with.
		r := *p.rec
		r.Timestamp = f.RecordTimestamp
		p.rec = &r
	}
	p.st.Attempt, p.st.FirstFailedAt = f.Attempt+1, f.FirstFailedAt
	if f.Code == CodeKeyBlocked {
		// It only waited behind its key: this is its first pass, with
		// in-place retries and then the first tier, and its own budget
		// starts now.
		p.st.FirstFailedAt, p.st.AtSource = p.now, true
	}
	return nil, nil
}
