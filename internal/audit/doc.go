// Package audit accounts for every source offset of a window: it reads,
// read_committed, a source topic's range and everything relay writes for
// it — the output, the retry tiers (retired ones too), the quarantine, the
// rejected and replay topics, and the ledger in the state topic — and
// gives each source record exactly one end state (processed, rejected,
// quarantined and where its failure stands), or says it is in flight (not
// consumed yet, parked by key ordering, or its latest copy waits in a tier
// or the replay topic). Anything else is a finding: lost, duplicated,
// misrouted, stuck (a copy in flight long past its due time, or a record
// waiting behind a head of its key that never settles), or unverifiable (the evidence was
// deleted by retention or compaction). A derived record is evidence for a
// source offset only when its identity agrees with the coordinates it
// names and its relay.source.fingerprint with the record there.
//
// It runs beside a relay that is writing, without disturbing it: it reads
// with a group id of its own (assigned, never subscribed), commits and
// writes nothing. Its view is one cut: the group's committed offsets are
// read first, then the ledger's end, then every other partition's end, so
// everything a committed offset or a ledger entry stands for is in view; a
// record with a copy not consumed at the cut is in flight and is not
// judged.
//
// The rooms follow the stages: plan.go (what to read), cut.go (the cut,
// and what retention took), read.go (reading), evidence.go and trim.go
// (what each record says), account.go and judge.go (the verdicts),
// report.go and metrics.go (saying them).
//
// Memory is per source offset in the window, six bytes each (a compact
// state word and 16 bits of the source record's fingerprint, not a map of
// ids), plus the first findings kept for the report.
package audit
