// Package rules owns business rules: CEL expressions over the decoded,
// upcast record, loaded from a YAML file and checked in full at start-up.
// A rule that matches says the record is rejected (or quarantined); the
// package returns that as a *tiers.Error and never writes anything.
package rules
