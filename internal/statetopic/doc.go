// Package statetopic owns relay's state topic and the reading of relay's
// own topics to their end: restoring key states and the ledger when
// partitions are assigned (Loader), reading a topic to the end it had
// (ReadToEnd, ReadFrom), and writing ledger changes in transactions of an
// operator command (Writer).
//
// The state topic is compacted and keyed; each record is a key state of
// key ordering or a ledger change (see packages pipeline and ledger). Its
// partition p holds the state of source partition p of every source.
// Partition 0 also holds the group's member records (package features),
// which the readers of key states and of the ledger skip.
package statetopic
