// Package reference renders docs/REFERENCE.md, the reference tables of
// relay's interface, from the code's own constants and tables: the
// environment variables and their defaults (config.Vars), the RELAY_KAFKA_*
// passthrough, relay's client defaults (kafkaclient.Defaults) and the
// managed properties, the headers (envelope), the
// failure classes and codes (tiers, and the codes the pipeline adds), the
// ledger's states and outcomes (ledger), the metrics (telemetry.Instruments)
// and the exit codes. A commands section is rendered from the list the
// caller passes (cmd/relay passes its command tree), and left out when it
// is empty.
//
// Regenerate the file after changing any of these:
//
//	go generate ./cmd/relay
//
// (go generate ./... does the same). cmd/relay's TestReferenceIsCurrent
// fails while docs/REFERENCE.md differs from what Render gives, and names
// that command.
package reference
