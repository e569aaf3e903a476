package replay

// Help is `relay replay --help`'s long text: the selection, the stop
// conditions and the exit codes of a replay.
const Help = `Replays quarantined records through relay: each selected record is
published to the replay topic with its original identity and
relay.replay.count incremented, in a transaction with its ledger change
(replaying); relay consumes the replay topic through the same pipeline and
records each outcome (resolved, failed-again) in the ledger.

Select with at least one of --ids, --code, --schema-version, --since/--until,
--min-age/--max-age, --source, --partition, --all: open failures only
(--ids also takes failed-again ones) unless --include-failed-again or
--include-replaying. Resolved, discarded and replaying failures and those
whose record is gone are skipped and counted. --dry-run writes nothing and
reports what would pass and what would still fail, by code. With -o json the
report (dry run or summary) is one pretty-printed JSON document.

A replay also stops by itself, saying why, when relay's lag on the replay
topic passes --max-replay-lag and keeps rising, when more than
--max-duplicates replayed records turn out to be copies of settled failures,
and when the hook times out more than --max-hook-timeouts times on the relay
instances --watch-metrics names.

Exit codes: 0 done, 1 runtime failure, 2 bad input (nothing written), 3
stopped (repeat failures or a stop condition), 4 outcomes not all known in
--wait.`
