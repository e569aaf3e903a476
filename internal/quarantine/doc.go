// Package quarantine is the operator's read model of the quarantine: the
// ledger of the state topic joined with the records of every quarantine
// topic (Load), the filters the commands select with, the views they print
// (list items, one failure's envelope and history, stats as the gauges
// compute them), and the discard of failures with a reason.
package quarantine
