package main

import (
	"time"

	"github.com/spf13/cobra"

	"relay/internal/cli"
)

func (a *app) probeCmd() *cobra.Command {
	timeout := 5 * time.Second
	c := &cobra.Command{
		Use:   "probe URL...",
		Short: "GET each URL; exit 0 when every one answers 200 (the chart's helm test checks /readyz with it)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, urls []string) error {
			return cli.Status(cli.Probe(c.Context(), urls, timeout, a.stdout, a.stderr))
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", timeout, "how long each URL may take")
	return c
}
