package pipeline

import (
	"time"

	"relay/internal/ledger"
	"relay/internal/schema"
	"relay/internal/tiers"
	"relay/internal/txn"
)

// pending is what the open transaction did, reported once it commits.
type pending struct {
	refused  map[string]int64 // followers copied instead of parked, by reason
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

// processed is the output of a record that passed, with what it settles:
// a replay's ledger change, its key's turn.
func (m *Machine) processed(p *pass, value []byte, info schema.Info) []txn.Output {
	m.count(ledger.OutcomeProcessed, "")
	p.traceOutcome(ledger.OutcomeProcessed, "", "", "")
	outs := []txn.Output{outputRecord(p, value)}
	if p.st.Attempt > 1 || p.origin.Tier >= 0 {
		m.noteEnded(ledger.OutcomeProcessed, p.st) // it had failed in this pass
	}
	if p.prev != nil && p.prev.ReplayCount > 0 {
		outs[0].Headers = append(outs[0].Headers, replayHeaders(p.prev)...)
		outs = append(outs, m.replayOutcome(p, ledger.Resolved, ledger.OutcomeProcessed, "", info)...)
	}
	return m.release(p, outs)
}

// decided is the next state of a record the policy decided other than an
// in-place retry: a tier hop, quarantine or rejected, with its key's
// state.
func (m *Machine) decided(p *pass, v verdict) []txn.Output {
	var outs []txn.Output
	if v.Kind == tiers.RetryTier {
		outs = m.toTier(p, v)
	} else {
		outs = m.toEnd(p, v)
	}
	if p.keyed {
		outs = m.keyedOutcome(p, v.Decision, outs)
	}
	return outs
}

// toTier moves p's record to the tier v names, due after its delay.
func (m *Machine) toTier(p *pass, v verdict) []txn.Output {
	now := m.now()
	f := m.failureOf(p, v, now)
	f.NotBefore = now.Add(v.Delay)
	topic := p.origin.Routes.Tiers[v.Tier]
	m.failed(p, v, ledger.OutcomeRetry, topic, f.Class, f.Attempt, f.Message)
	return []txn.Output{tierRecord(p, topic, f, m.compat.Headers(f), now)}
}

// toEnd ends p's pass as v says, quarantined or rejected, with the ledger
// change that goes with it.
func (m *Machine) toEnd(p *pass, v verdict) []txn.Output {
	now := m.now()
	f := m.failureOf(p, v, now)
	topic, outcome := p.origin.Routes.Quarantine, ledger.OutcomeQuarantined
	if v.Kind == tiers.Reject {
		topic, outcome = p.origin.Routes.Rejected, ledger.OutcomeRejected
	}
	m.failed(p, v, outcome, topic, f.Class, f.Attempt, f.Message)
	outs := []txn.Output{terminalRecord(p, topic, f, m.compat.Headers(f))}
	if p.st.Attempt > 1 || p.origin.Tier >= 0 {
		m.noteEnded(outcome, p.st) // it had failed before in this pass
	}
	switch {
	case f.ReplayCount > 0 && v.Kind == tiers.Reject:
		outs = append(outs, m.replayOutcome(p, ledger.Resolved, ledger.OutcomeRejected, v.Code, v.info)...)
	case f.ReplayCount > 0:
		outs = append(outs, m.replayOutcome(p, ledger.FailedAgain, "", v.Code, v.info)...)
	case v.Kind == tiers.Quarantine && m.stateTopic != "":
		outs = append(outs, m.ledgerOutput(m.openEvent(p, f, topic, now)))
	}
	return outs
}

// failed counts and logs a record that failed and goes to topic.
func (m *Machine) failed(p *pass, v verdict, outcome ledger.Outcome, topic, class string, attempt int, msg string) {
	m.count(outcome, v.Code)
	p.traceOutcome(outcome, class, v.Code, msg)
	if m.failures.allow(m.log, v.Code, m.now()) {
		m.log.Info("record failed", append([]any{"id", p.id, "outcome", outcome, "code", v.Code, "class", class,
			"attempt", attempt, "topic", topic, "error", msg}, p.traceAttrs()...)...)
	}
}

func (m *Machine) count(outcome ledger.Outcome, code string) {
	if m.pending.outcomes == nil {
		m.pending.outcomes = map[outcomeCode]int{}
	}
	m.pending.outcomes[outcomeCode{outcome, code}]++
}

// replayed counts a replayed record that reached a ledger state or was a
// duplicate.
func (m *Machine) replayed(outcome string) {
	if m.pending.replays == nil {
		m.pending.replays = map[string]int{}
	}
	m.pending.replays[outcome]++
}

// noteEnded notes a record that had failed and reached an end state.
func (m *Machine) noteEnded(outcome ledger.Outcome, st tiers.State) {
	m.pending.ended = append(m.pending.ended, ended{outcome, st.Attempt, m.now().Sub(st.FirstFailedAt)})
}

// report hands the committed transaction's outcomes to Outcomes.
func (m *Machine) report() {
	m.lost.total += m.lost.pending
	for why, n := range m.pending.refused {
		if m.refused == nil {
			m.refused = map[string]int64{}
		}
		m.refused[why] += n
	}
	for k, n := range m.pending.outcomes {
		m.outcomes.Outcome(k.outcome, k.code, n)
	}
	for k, n := range m.pending.replays {
		m.outcomes.Replayed(k, n)
	}
	for _, e := range m.pending.ended {
		m.outcomes.Ended(e.outcome, e.attempts, e.elapsed)
	}
}

func (m *Machine) forget() {
	m.lost.pending = 0
	clear(m.pending.refused)
	clear(m.pending.outcomes)
	clear(m.pending.replays)
	m.pending.ended = m.pending.ended[:0]
}
