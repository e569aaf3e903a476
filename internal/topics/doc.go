// Package topics owns the topics relay needs besides its sources: the plan
// (names, partition counts, retention), creating what is missing, and the
// start-up check that every partition-preserving hop has at least as many
// partitions as its source. It never deletes or shrinks a topic.
package topics
