package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"relay/internal/cli"
	"relay/internal/config"
)

func (a *app) configCmd() *cobra.Command {
	var out cli.Output
	c := &cobra.Command{
		Use:   "config",
		Short: "print the effective configuration, secrets masked",
		Long: `Prints every relay variable with its value, default or derived value, and
the librdkafka properties passed through, secrets masked; a RELAY_ variable
relay does not know is named on stderr. With -o json, one JSON object of
variable names to values.`,
		Args: cli.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			return cli.Status(a.printConfig(out))
		},
	}
	cli.OutputFlag(c, &out, false)
	return c
}

func (a *app) printConfig(out cli.Output) int {
	cfg, ok := cli.LoadConfig(a.lookup, a.environ, a.stderr)
	if !ok {
		return cli.Usage
	}
	lines, m := cfg.Effective(), map[string]string{}
	for _, line := range lines {
		k, v, _ := strings.Cut(line, "=")
		m[k] = v
	}
	a.print(out, m, func(w io.Writer) { fmt.Fprintln(w, strings.Join(lines, "\n")) })
	for _, name := range config.Unknown(a.environ) {
		fmt.Fprintf(a.stderr, "warning: %s is not a relay variable (typo?); it is ignored\n", name)
	}
	return cli.OK
}
