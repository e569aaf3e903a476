package reference

import (
	"relay/internal/ledger"
	"relay/internal/telemetry"
)

// A ledger state, who writes it, and in which transaction.
type stateDoc struct {
	state, meaning, writer, txn string
}

// states are the ledger's states, in the order of a failure's life. The
// names are the ledger's constants.
func states() []stateDoc {
	return []stateDoc{
		{str(ledger.Open), "quarantined, nobody acted on it yet", "relay", "the quarantine record"},
		{str(ledger.Replaying), "published to the replay topic, outcome not known yet (unresolved in the gauges)", "`relay replay`", "the replay record"},
		{str(ledger.Resolved), "a replay was processed, or rejected by a business rule: a known state that needs nobody", "relay", "the output or rejected record of the replayed record"},
		{str(ledger.FailedAgain), "a replay was quarantined again; it is not replayed automatically", "relay", "the new quarantine record of the replayed record"},
		{str(ledger.Discarded), "an operator closed it without a replay", "`relay quarantine discard`", "— (its own transaction)"},
	}
}

// outcomes are how a replay ends, besides the states.
func outcomes() [][]string {
	return [][]string{
		{code(str(ledger.OutcomeProcessed)), code(str(ledger.Resolved)), "the replayed record reached the output"},
		{code(str(ledger.OutcomeRejected)), code(str(ledger.Resolved)), "the replayed record reached the rejected topic (a business rejection)"},
		{code(str(ledger.OutcomeDuplicate)), "— (a note in the history)", "a copy of a settled replay, or a replayed record skipped because its failure was discarded; counted in `" +
			promName(telemetry.MetricReplayOutcomes) + "`"},
	}
}

// ledgerStates renders the ledger's states and outcomes.
func ledgerStates(d *doc) {
	d.para("Every failure id that reaches quarantine has a state in the state topic. Each change is one record, " +
		"written in the transaction of what caused it.")
	d.heading(3, "States")
	rows := [][]string{}
	for _, s := range states() {
		rows = append(rows, []string{code(s.state), s.meaning, s.writer, s.txn})
	}
	d.table([]string{"state", "meaning", "written by", "in the transaction of"}, rows)
	d.heading(3, "Outcomes of a replay")
	d.table([]string{"outcome", "state", "meaning"}, outcomes())
}
