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

	"relay/internal/cli"
	_ "relay/internal/malloc" // two malloc arenas: see the package
	"relay/internal/supervise"
)

func main() {
	os.Exit(cli.Guarded(os.Stderr, func() int {
		a := &app{lookup: os.LookupEnv, stdout: os.Stdout, stderr: os.Stderr}
		args := os.Args[1:]
		switch {
		case supervise.ByParent(os.LookupEnv):
			sigs, err := supervise.Become(os.Stderr)
			if err != nil {
				fmt.Fprintf(os.Stderr, "relay: %v\n", err)
				return cli.Usage
			}
			a.signals = sigs
		case len(args) > 0 && args[0] == "run":
			return supervise.Run(args, os.Stderr)
		}
		a.environ = os.Environ() // without the supervisor's variable
		return a.run(context.Background(), args)
	}))
}

// run executes a command line and returns the exit code; only main exits.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	return (&app{lookup: lookup, environ: environ, stdout: stdout, stderr: stderr}).run(ctx, args)
}

func (a *app) run(ctx context.Context, args []string) int {
	stderr := a.stderr
	root := newRoot(a)
	root.SetArgs(args)
	c, err := root.ExecuteContextC(ctx)
	var code cli.ExitCode
	switch {
	case err == nil:
		return cli.OK
	case errors.As(err, &code):
		return int(code) // the command said what went wrong
	}
	// A command line cobra refused: an unknown command or flag, a bad
	// flag value, a wrong number of arguments.
	fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", c.CommandPath(), err, c.CommandPath())
	return cli.Usage
}
