// Command relay is the single ingress stage in front of the business
// consumers of Apache Kafka: every source record reaches a known state in the
// same Kafka transaction that commits its source offset.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// Exit codes.
const (
	exitOK         = 0
	exitFailure    = 1 // runtime failure: fenced, broker unusable, preflight failed, a crash
	exitUsage      = 2 // bad command line or configuration; nothing was started
	exitStopped    = 3 // relay replay: the repeat-failure threshold stopped it
	exitIncomplete = 4 // relay replay: published, but not every outcome is known in time
)

func main() {
	os.Exit(guarded(os.Stderr, func() int {
		return run(context.Background(), os.Args[1:], os.LookupEnv, os.Environ(), os.Stdout, os.Stderr)
	}))
}

// run executes a command line and returns the exit code; only main exits.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	root := newRoot(&app{lookup: lookup, environ: environ, stdout: stdout, stderr: stderr})
	root.SetArgs(args)
	c, err := root.ExecuteContextC(ctx)
	var code exitCode
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code) // the command said what went wrong
	}
	// A command line cobra refused: an unknown command or flag, a bad
	// flag value, a wrong number of arguments.
	fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", c.CommandPath(), err, c.CommandPath())
	return exitUsage
}
