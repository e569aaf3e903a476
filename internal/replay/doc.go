// Package replay is the replay workflow of `relay replay`: the selection of
// quarantined failures (Choose), the whole-key sample, publishing at a
// bounded rate to the replay topic with each record's ledger change in one
// transaction, following the outcomes relay writes to the ledger, the
// repeat-failure threshold, and the dry run, which asks the pipeline's
// admission, rules and decide table (Judge) what would happen today.
package replay
