package main

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"relay/internal/buildinfo"

	"github.com/spf13/cobra"
)

// app is what every command reads and writes: the environment (the only
// source of configuration) and the standard streams.
type app struct {
	lookup         func(string) (string, bool)
	environ        []string
	stdout, stderr io.Writer
	// signals are the daemon's when its supervisor relays them (nil: the
	// daemon takes the process's own).
	signals <-chan os.Signal
}

// exitCode ends a command that has already said what went wrong; any other
// error a command returns is a bad command line (exit 2, with a hint).
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// status is nil for exitOK, else the code as an error.
func status(code int) error {
	if code == exitOK {
		return nil
	}
	return exitCode(code)
}

const rootLong = `relay — exactly-once ingress stage for Apache Kafka.

Configuration comes from environment variables only (RELAY_*, RELAY_KAFKA_*
passed to librdkafka, OTEL_*), listed in docs/REFERENCE.md. The commands that read
Kafka (topics, quarantine, replay, audit, console) need no RELAY_TRANSACTIONAL_ID.

Exit codes: 0 ok, 1 runtime failure (a crash included), 2 bad command line
or configuration (nothing started, no broker contacted); relay replay adds
3 (stopped by its repeat-failure threshold) and 4 (outcomes not known in
time); relay audit exits 1 on anything lost, duplicated or misrouted.`

func newRoot(a *app) *cobra.Command {
	root := group(&cobra.Command{
		Use:     "relay",
		Short:   "exactly-once ingress stage for Apache Kafka",
		Long:    rootLong,
		Version: "relay " + buildinfo.Version,
		// Errors are printed by run, with the exit code they call for.
		SilenceErrors: true,
		SilenceUsage:  true,
	}, a)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(a.runCmd(), a.configCmd(), a.topicsCmd(), a.quarantineCmd(), a.replayCmd(), a.auditCmd(), a.consoleCmd(), a.versionCmd())
	stderrFlags(root, a.stderr)
	return root
}

// stderrFlags sends what the flags of c and its subcommands say (a
// deprecated flag's notice) to stderr: stdout may be JSON.
func stderrFlags(c *cobra.Command, w io.Writer) {
	c.Flags().SetOutput(w)
	for _, sub := range c.Commands() {
		stderrFlags(sub, w)
	}
}

// group makes c a command of subcommands: alone, it prints its help on
// stderr and exits 2; an unknown subcommand is a bad command line.
func group(c *cobra.Command, a *app) *cobra.Command {
	c.Args = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath())
		}
		return nil
	}
	c.RunE = func(c *cobra.Command, _ []string) error {
		c.SetOut(a.stderr)
		_ = c.Help()
		return exitCode(exitUsage)
	}
	return c
}

// noArgs refuses positional arguments.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q (options are flags; configuration comes from the environment)", args[0])
	}
	return nil
}

// Output formats of the commands that print tables.
const (
	outTable = "table"
	outJSON  = "json"
)

// output is the -o/--output flag of a command that prints a table. A
// value other than table or json is a bad command line when it is parsed.
type output string

func (o *output) String() string { return string(*o) }
func (o *output) Type() string   { return "format" }
func (o *output) Set(v string) error {
	if v != outTable && v != outJSON {
		return fmt.Errorf("not %s or %s", outTable, outJSON)
	}
	*o = output(v)
	return nil
}

// jsonFlag is the deprecated --json: set, it asks for -o json.
type jsonFlag struct{ out *output }

func (j jsonFlag) String() string { return "false" }
func (j jsonFlag) Type() string   { return "bool" }
func (j jsonFlag) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if b {
		*j.out = outJSON
	}
	return err
}

// outputFlag adds -o/--output to c and, with alias, the deprecated --json.
func outputFlag(c *cobra.Command, out *output, alias bool) {
	*out = outTable
	c.Flags().VarP(out, "output", "o", "output format: table, or json (one pretty-printed JSON document)")
	if alias {
		c.Flags().VarPF(jsonFlag{out}, "json", "", "same as -o json").NoOptDefVal = "true"
		_ = c.Flags().MarkDeprecated("json", "use -o json")
	}
}
