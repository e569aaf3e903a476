// Package pipeline owns what relay does to one source record: the Handlers
// plugged into the transactional loop (internal/txn). It decides outputs; it
// does not produce, commit or retry by itself.
package pipeline
