package reference

import "strconv"

// ExitCode is one exit status of relay and what it means.
type ExitCode struct {
	Code    int
	Meaning string
}

// ExitCodes are relay's exit statuses. cmd/relay returns them (exitOK,
// exitFailure, exitUsage, and relay replay's exitStopped and
// exitIncomplete).
var ExitCodes = []ExitCode{
	{0, "stopped gracefully; a command did what it was asked; `relay audit`: nothing lost, duplicated, misrouted or stuck"},
	{1, "runtime failure (fenced, preflight failed, shutdown bound exceeded, broker unreachable for a command), and a crash: " +
		"relay logs `relay: internal error` with the reason and the stack; that is a bug in relay, not a configuration problem " +
		"(`relay run` reports every crash so, a Go runtime fatal error and a panic on a client library's goroutine included, " +
		"and a daemon process killed by a signal as `the daemon process was killed by`); " +
		"`relay audit`: a finding (a record lost, duplicated, misrouted or stuck)"},
	{2, "bad command line or configuration: nothing was written (a command other than `relay run` also exits 2 on a Go " +
		"runtime crash outside relay's code, which prints `fatal error:` or `panic:` with the stack: a bug, not a configuration problem)"},
	{3, "`relay replay`: stopped by the repeat-failure threshold; `relay audit`: could not complete (a broker away, a missing ACL, a time limit, a crash of the audit: `the audit crashed, a bug in relay` with its stack): no verdict, and its metrics say `incomplete` (so do those of a run refused for its window or configuration, exit 2, with a --source)"},
	{4, "`relay replay`: published, but not every outcome was known within `--wait` (is relay running?)"},
}

// exits renders ExitCodes.
func exits(d *doc) {
	rows := make([][]string, 0, len(ExitCodes))
	for _, e := range ExitCodes {
		rows = append(rows, []string{strconv.Itoa(e.Code), e.Meaning})
	}
	d.table([]string{"exit code", "meaning"}, rows)
}
