// Package tiers decides what becomes of a record that failed: it owns the
// failure classes, the one table from cause to decision, the retry budget
// and the plan of non-blocking retry tiers.
//
// A decision is a value (Decision), never an error. The package does no I/O
// and knows nothing of Kafka; the pipeline acts on its decisions.
package tiers
