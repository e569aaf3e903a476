// Package audit accounts for every source offset of a window: it reads,
// read_committed, a source topic's range and everything relay writes for
// it — the output, the retry tiers (retired ones too), the quarantine, the
// rejected and replay topics, and the ledger in the state topic — and
// gives each source record exactly one end state (processed, rejected,
// quarantined and where its failure stands), or says it is in flight (not
// consumed yet, or its latest copy waits in a tier or the replay topic).
// Anything else is a finding: lost, duplicated, misrouted, or unverifiable
// (the evidence was deleted by retention or compaction).
//
// It runs beside a relay that is writing, without disturbing it: it reads
// with a group id of its own (assigned, never subscribed), commits and
// writes nothing. Its view is one cut: the group's committed offsets are
// read first, then every partition up to the end it had after that, so
// everything a committed offset stands for is in view; a record whose
// latest copy was not consumed at the cut is in flight and is not judged.
//
// Memory is per source offset in the window, four bytes each (a compact
// state word, not a map of ids), plus the first findings kept for the
// report.
package audit
