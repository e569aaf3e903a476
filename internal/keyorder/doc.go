// Package keyorder is key ordering's policy. For now it holds the form in
// which a partition's parked records will ride on its committed offset:
// a blocked key's followers kept in memory instead of copied through the
// tiers, the committed offset the lowest of them, and the offsets above
// it that are still parked in the commit's metadata, so that a new owner
// skips every other offset between the two.
package keyorder
