package cli

import "fmt"

// Exit codes.
const (
	OK         = 0
	Failure    = 1 // runtime failure: fenced, broker unusable, preflight failed, a crash
	Usage      = 2 // bad command line or configuration; nothing was started
	Stopped    = 3 // relay replay: the repeat-failure threshold or a stop condition stopped it
	NoVerdict  = 3 // relay audit: it could not complete
	Incomplete = 4 // relay replay: published, but not every outcome is known in time
)

// ExitCode ends a command that has already said what went wrong; any other
// error a command returns is a bad command line (exit 2, with a hint).
type ExitCode int

func (c ExitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// Status is nil for OK, else the code as an error.
func Status(code int) error {
	if code == OK {
		return nil
	}
	return ExitCode(code)
}
