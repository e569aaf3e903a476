package ledger

// State is where a quarantined failure stands. Its values are written to
// the state topic and shown by the commands and metrics.
type State string

// States of a quarantined failure.
const (
	Open        State = "open"         // quarantined, nobody acted on it yet
	Replaying   State = "replaying"    // published to the replay topic, outcome not known yet
	Resolved    State = "resolved"     // a replay reached processed (or a business rejection)
	FailedAgain State = "failed-again" // a replay was quarantined again; not replayed automatically
	Discarded   State = "discarded"    // an operator closed it without replay
)

// States lists every state in the order of a failure's life.
var States = []State{Open, Replaying, Resolved, FailedAgain, Discarded}

// Unresolved reports whether a failure in state s still needs someone.
func Unresolved(s State) bool { return s == Open || s == FailedAgain || s == Replaying }

// Outcome is what became of a record. The record metrics count records by
// outcome (processed, retry, quarantined, rejected); a ledger change of a
// replayed record carries one (processed or rejected when it is resolved,
// duplicate for a copy of a failure settled already).
type Outcome string

// Outcomes of a record.
const (
	OutcomeProcessed   Outcome = "processed"   // written to the output
	OutcomeRetry       Outcome = "retry"       // moved to a retry tier
	OutcomeQuarantined Outcome = "quarantined" // written to the quarantine topic
	OutcomeRejected    Outcome = "rejected"    // written to the rejected topic
	// OutcomeDuplicate is a copy of a replayed record whose failure was
	// settled already: relay wrote nothing for it but a ledger note.
	OutcomeDuplicate Outcome = "duplicate"
)

// Outcomes lists every outcome: those of RecordOutcomes, then duplicate.
var Outcomes = []Outcome{OutcomeProcessed, OutcomeRetry, OutcomeQuarantined, OutcomeRejected, OutcomeDuplicate}

// RecordOutcomes lists the outcomes the record metrics count, in order.
var RecordOutcomes = []Outcome{OutcomeProcessed, OutcomeRetry, OutcomeQuarantined, OutcomeRejected}
