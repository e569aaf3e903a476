package keyorder

// Data that a newer relay wrote in a format this one does not read:
// relay stops on it rather than skip or misread it. A relay that skipped
// a newer parked set would read its records again (duplicated outputs,
// key order broken), and one that skipped a newer key state would let
// the key's records past its head.

import "fmt"

// NewerError is data of format Version, when this relay reads formats up
// to Reads.
type NewerError struct {
	What    string // what the data is and where, e.g. "key state \"key|…\""
	Version int
	Reads   int
}

func (e *NewerError) Error() string {
	return fmt.Sprintf("%s has format version %d, written by a newer relay; this relay reads up to version %d, "+
		"and stops rather than skip or misread it: run the newer relay again "+
		"(a rollback past a format change, and what to do if no newer relay ever ran here, are in docs/RUNBOOK.md, \"Rolling back\")", e.What, e.Version, e.Reads)
}
