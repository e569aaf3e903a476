package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"relay/internal/cli"
	"relay/internal/config"
)

func (a *app) configCmd() *cobra.Command {
	var out cli.Output
	c := &cobra.Command{
		Use:   "config",
		Short: "print the effective configuration, secrets masked",
		Long: `Prints every relay variable with its value, default or derived value, the
librdkafka properties passed through and those relay sets by default, and
the OpenTelemetry (OTEL_*) settings, secrets masked, in groups that say
where each value comes from (environment, file, derived, default). A
RELAY_ variable relay does not know is named on stderr. With -o json, one
JSON object of variable names to values.`,
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
	cli.ShowConfig(a.stdout, out, cfg, a.environ)
	for _, name := range config.Unknown(a.environ) {
		fmt.Fprintf(a.stderr, "warning: %s is not a relay variable (typo?); it is ignored\n", name)
	}
	return cli.OK
}
