// Package pipeline owns what relay does to one record: the failure state
// machine. A record from a source, a retry tier or the replay topic goes
// through admission (schema), rules and the optional hook; on failure the
// classifier's decision says whether it is retried in place, moved to a
// tier, quarantined or rejected, and the pipeline builds that next record
// with its failure envelope.
//
// It returns outputs to the transaction loop and writes nothing itself:
// every next state is written in the transaction that commits the source
// offset. It must not sleep except for the bounded in-place retries the
// configuration validated against the transaction budget.
package pipeline
