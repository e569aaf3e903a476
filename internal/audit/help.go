package audit

// Help is `relay audit --help`'s long text: the end states, the findings
// and the exit codes this package judges by.
const Help = `Accounts for every source offset of a window: reads, read_committed, the
source range and everything relay writes for it (output, retry tiers,
quarantine, rejected and replay topics, and the ledger in the state topic),
and gives each source record exactly one end state — processed, rejected,
or quarantined (open, resolved, failed-again, discarded, replaying) — or
says it is in flight (not consumed yet, parked by key ordering, or its
latest copy waits in a tier or the replay topic). Anything else is a
finding:

  lost          consumed (below the group's committed offset, or settled
                above it as the commit's parked set says), with no end
                state and no copy anywhere
  duplicated    more than one end state, or two outputs for one
                relay.message.id (replays included)
  misrouted     a record in relay's topics for the source that names
                another source or partition, or none
  stuck         a copy in a tier or the replay topic that relay has not
                consumed long after it was due (--stuck-after); under key
                ordering, a record copied or parked behind a head of its
                key that never settles
  unverifiable  the source record or its end state was deleted by
                retention or compaction: nothing can be said, it is not lost

Aborted records and transaction markers are not findings (read_committed
hides them); they are counted as skipped.

It runs beside a relay that is writing, without disturbing it: its
readers use their own group id (RELAY_GROUP_ID.audit), are assigned, never
subscribed, and it commits and writes nothing.

The window: --from/--to as RFC 3339 times or durations ago (24h), or
--from-offsets/--to-offsets as PARTITION:OFFSET,... (To is exclusive);
unbounded by default (the whole retained source, up to its end).

Exit codes: 0 nothing lost, duplicated, misrouted or stuck; 1 a finding
of those (a record lost, duplicated, misrouted or stuck);
2 bad command line or configuration; 3 the audit could not complete (a
broker away, an ACL missing, a time limit, a crash of the audit itself):
no verdict. --metrics-file and --push-url say the outcome of every run
with a --source, an incomplete one's and a refused window's or
configuration's too (incomplete).`
