// Package txn owns relay's transactional consume-transform-produce loop:
// one consumer and one transactional producer per instance, and the rule that
// a source offset is committed only in the transaction that writes the
// record's outputs (KIP-98, with KIP-447 group metadata so one producer can
// serve every partition the instance owns).
//
// The loop has one shape: poll → begin → handle → produce → send offsets →
// commit, and every pass ends with an explicit result: committed, aborted and
// rewound to the committed offsets, or fatal. What happens to a record is
// decided by a Handler; this package does not look inside records, and it
// never exits the process: fatal errors are returned to the caller.
package txn
