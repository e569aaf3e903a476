package main

import (
	"relay/internal/buildinfo"
	"relay/internal/cli"

	"github.com/spf13/cobra"
)

func (a *app) runCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "run the daemon (consume, decide, produce, commit in one transaction)",
		Long: `Runs the daemon until SIGINT or SIGTERM (then exit 0). It takes no
arguments: configuration comes from the environment.`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return cli.Status(runDaemon(c.Context(), a.lookup, a.environ, a.signals, a.stderr))
		},
	}
}

func (a *app) versionCmd() *cobra.Command {
	var out cli.Output
	c := &cobra.Command{
		Use:   "version",
		Short: "print relay's version, commit and date, and its Go and librdkafka versions",
		Args:  cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			v := buildinfo.Get()
			a.print(out, v, v.Text)
			return nil
		},
	}
	cli.OutputFlag(c, &out, false)
	return c
}
