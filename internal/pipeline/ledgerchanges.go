package pipeline

import (
	"time"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/schema"
	"relay/internal/txn"
)

// The quarantine ledger's changes that relay writes, each in the
// transaction of the record that causes it (see package ledger). Nothing
// is written without a state topic.

// openEvent is the ledger change of a record quarantined in topic with
// envelope f: its failure is open.
func (m *Machine) openEvent(p *pass, f *envelope.Failure, topic string, now time.Time) *ledger.Event {
	return &ledger.Event{
		ID: p.id, State: ledger.Open, At: now, Actor: m.actor, Reason: "quarantined by relay: " + f.Code,
		Code: f.Code, Attempt: f.Attempt, FirstFailedAt: f.FirstFailedAt,
		Source:        ledger.SourceOf(f),
		SchemaVersion: f.SchemaVersion, Topic: topic, RecordTime: p.rec.Timestamp,
	}
}

// replayOutcome is the ledger record of a replayed record's end: resolved
// (processed or rejected) or failed-again.
func (m *Machine) replayOutcome(p *pass, state ledger.State, outcome ledger.Outcome, code string, info schema.Info) []txn.Output {
	if m.stateTopic == "" {
		return nil
	}
	prev := p.prev
	e := &ledger.Event{
		ID: prev.ID, State: state, At: m.now(), Actor: m.actor, Outcome: outcome, Code: code,
		Attempt: p.st.Attempt, FirstFailedAt: p.st.FirstFailedAt,
		ReplayID: prev.ReplayID, ReplayCount: prev.ReplayCount,
		Source:        ledger.SourceOf(prev),
		SchemaVersion: info.Version,
	}
	switch {
	case state == ledger.FailedAgain:
		e.Reason = "replay " + prev.ReplayID + " failed again: " + code
		// The record is quarantined again, in the same partition.
		e.Topic, e.RecordTime = m.table.quarantineOf(prev.SourceTopic), p.rec.Timestamp
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
func (m *Machine) duplicate(p *pass, state ledger.State) []txn.Output {
	prev := p.prev
	m.log.Warn("replayed record already settled; not output again", "id", prev.ID, "state", state,
		"replay_id", prev.ReplayID, "replay_count", prev.ReplayCount, "topic", p.rec.Topic, "offset", p.rec.Offset)
	m.replayed(string(ledger.OutcomeDuplicate))
	p.traceOutcome(ledger.OutcomeDuplicate, "", "", "")
	if m.stateTopic == "" {
		return nil
	}
	e := &ledger.Event{
		ID: prev.ID, State: state, At: m.now(), Actor: m.actor, Outcome: ledger.OutcomeDuplicate,
		Reason:   "copy of replay " + prev.ReplayID + " skipped: the failure is " + string(state) + " already",
		ReplayID: prev.ReplayID, ReplayCount: prev.ReplayCount,
		Source: ledger.SourceOf(prev),
	}
	return []txn.Output{m.ledgerOutput(e)}
}

// discarded is the ledger note of a replayed record dropped because its
// failure was discarded.
func (m *Machine) discarded(p *pass) []txn.Output {
	prev := p.prev
	m.replayed(string(ledger.OutcomeDuplicate))
	if m.stateTopic == "" {
		return nil
	}
	return []txn.Output{m.ledgerOutput(&ledger.Event{
		ID: prev.ID, State: ledger.Discarded, At: m.now(), Actor: m.actor, Outcome: ledger.OutcomeDuplicate,
		Reason:   "replay " + prev.ReplayID + " skipped: the failure was discarded",
		ReplayID: prev.ReplayID, ReplayCount: prev.ReplayCount, Source: ledger.SourceOf(prev),
	})}
}

// ledgerOutput is the state-topic record of ledger change e, noted (when it
// settles the failure) for the open transaction.
func (m *Machine) ledgerOutput(e *ledger.Event) txn.Output {
	m.settled.Record(e)
	return txn.Output{Topic: m.stateTopic, Partition: e.Partition(), Key: []byte(e.Key()), Value: e.Value()}
}
