package main

import (
	"fmt"

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
	return &cobra.Command{
		Use:   "version",
		Short: "print relay's version, commit and date, and its Go and librdkafka versions",
		Args:  cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintf(a.stdout, "relay %s\ncommit: %s\ndate: %s\ngo: %s\nlibrdkafka: %s\n", buildinfo.Version, buildinfo.Commit, buildinfo.Date,
				buildinfo.GoVersion(), buildinfo.Librdkafka())
			return nil
		},
	}
}
