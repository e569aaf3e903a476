// Package cli is what every relay command shares: the exit codes, the
// -o/--output flag, JSON and text printing, command groups that refuse
// unknown subcommands, the configuration load that names each bad
// variable, and the crash guard that makes a panic a runtime failure.
// The commands themselves live in cmd/relay and only bind flags and print.
package cli
