package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
)

// Group makes c a command of subcommands: alone, it prints its help on
// stderr and exits 2; an unknown subcommand is a bad command line.
func Group(c *cobra.Command, stderr io.Writer) *cobra.Command {
	c.Args = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath())
		}
		return nil
	}
	c.RunE = func(c *cobra.Command, _ []string) error {
		c.SetOut(stderr)
		_ = c.Help()
		return ExitCode(Usage)
	}
	return c
}

// NoArgs refuses positional arguments.
func NoArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q (options are flags; configuration comes from the environment)", args[0])
	}
	return nil
}

// StderrFlags sends what the flags of c and its subcommands say (a
// deprecated flag's notice) to stderr: stdout may be JSON.
func StderrFlags(c *cobra.Command, w io.Writer) {
	c.Flags().SetOutput(w)
	for _, sub := range c.Commands() {
		StderrFlags(sub, w)
	}
}

// Output formats of the commands that print tables.
const (
	Table = "table"
	JSON  = "json"
	YAML  = "yaml"
)

// Output is the -o/--output flag of a command that prints a table. A
// value other than table, json or yaml is a bad command line when it is
// parsed.
type Output string

func (o *Output) String() string { return string(*o) }
func (o *Output) Type() string   { return "format" }
func (o *Output) Set(v string) error {
	if v != Table && v != JSON && v != YAML {
		return fmt.Errorf("not %s, %s or %s", Table, JSON, YAML)
	}
	*o = Output(v)
	return nil
}

// Document is the -o/--output flag of a command that prints one document
// (relay quarantine show): json or yaml.
type Document struct{ Output }

func (d *Document) Set(v string) error {
	if v != JSON && v != YAML {
		return fmt.Errorf("not %s or %s", JSON, YAML)
	}
	d.Output = Output(v)
	return nil
}

// DocumentFlag adds -o/--output (json or yaml, json by default) to c.
func DocumentFlag(c *cobra.Command, out *Document) {
	out.Output = JSON
	c.Flags().VarP(out, "output", "o", "output format: json (one pretty-printed JSON document) or yaml (the same document as YAML)")
}

// jsonFlag is the deprecated --json: set, it asks for -o json.
type jsonFlag struct{ out *Output }

func (j jsonFlag) String() string { return "false" }
func (j jsonFlag) Type() string   { return "bool" }
func (j jsonFlag) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if b {
		*j.out = JSON
	}
	return err
}

// OutputFlag adds -o/--output to c and, with alias, the deprecated --json.
func OutputFlag(c *cobra.Command, out *Output, alias bool) {
	*out = Table
	c.Flags().VarP(out, "output", "o", "output format: table, json (one pretty-printed JSON document) or yaml (the same document as YAML)")
	if alias {
		c.Flags().VarPF(jsonFlag{out}, "json", "", "same as -o json").NoOptDefVal = "true"
		_ = c.Flags().MarkDeprecated("json", "use -o json")
	}
}
