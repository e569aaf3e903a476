// Package console is `relay console`: a web console over the quarantine,
// for the people who own it. It reads and acts through the packages the
// operator commands use — the snapshot of the ledger and the quarantine
// topics (package quarantine), discards with a reason, and the replay
// workflow (package replay) with its dry run, sample, rate, threshold and
// stop conditions — so the console and the commands cannot disagree.
//
// Reading is open to whoever reaches the listener (loopback by default).
// Every action needs an actor: an operator signed in with the console
// token and their name, or the user a trusted authenticating proxy names
// in a header. Actions are POSTs checked for cross-site origin and a
// per-session CSRF token; pages carry a script-free CSP (scripts only
// from the console's own embedded files) and frame denial.
package console
