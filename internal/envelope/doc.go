// Package envelope owns the names and formats of the headers relay adds to
// the records it writes. Header names are part of relay's interface: users'
// tools and acceptance runs read them by name, so they are declared here
// once, as constants, and docs/REFERENCE.md lists them from here
// (OutputHeaders, FailureHeaders).
//
// This package only names and formats; it does not talk to Kafka.
package envelope
