package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/spf13/cobra"

	"relay/internal/config"
	"relay/internal/daemon"
	"relay/internal/kafkaclient"
	"relay/internal/topics"
)

func (a *app) topicsCmd() *cobra.Command {
	c := group(&cobra.Command{
		Use:   "topics",
		Short: "show or create the topics relay needs (output, retry tiers, quarantine, rejected, replay, state)",
	}, a)
	var out output
	plan := &cobra.Command{
		Use:   "plan",
		Short: "show the topics relay needs, what exists, and what apply would create",
		Long: `Shows the topics relay needs, what exists, and what apply would create.
With -o json, one JSON array of the topics.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return status(a.topics(c.Context(), false, 0, out))
		},
	}
	outputFlag(plan, &out, false)
	replication := 3
	apply := &cobra.Command{
		Use:   "apply",
		Short: "create the missing topics, add partitions to those with fewer than their source",
		Long: `Creates the missing topics and adds partitions to those with fewer than
their source. It never deletes a topic or changes its settings.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if replication < 1 {
				return fmt.Errorf("--replication-factor %d: not a whole number from 1", replication)
			}
			return status(a.topics(c.Context(), true, replication, outTable))
		},
	}
	apply.Flags().IntVar(&replication, "replication-factor", 3, "replication factor of created topics (capped at the brokers present)")
	c.AddCommand(plan, apply)
	return c
}

// topics is `relay topics plan` and, with apply, `relay topics apply`.
func (a *app) topics(ctx context.Context, apply bool, replication int, out output) int {
	name := "relay topics plan"
	if apply {
		name = "relay topics apply"
	}
	cfg, ok := loadConfig(config.ForOperators(a.lookup), a.environ, a.stderr)
	if !ok {
		return exitUsage
	}
	// A plain producer, for its watermark queries (apply checks with them
	// that what it created serves requests); the admin client shares its
	// connections.
	p, err := kafkaclient.Producer(cfg)
	if err != nil {
		return daemonExit(daemon.ClientConfigError(cfg, "producer", err), a.stderr)
	}
	defer p.Close()
	ad, err := kafka.NewAdminClientFromProducer(p)
	if err != nil {
		fmt.Fprintf(a.stderr, "%s: admin client: %v\n", name, err)
		return exitFailure
	}
	defer ad.Close()
	timeout := max(cfg.OpTimeout, 10*time.Second)
	var states []topics.State
	if apply {
		var done topics.Applied
		states, done, err = topics.Reconcile(ctx, ad, p, cfg, replication, timeout)
		a.applied(done, replication)
	} else {
		states, err = topics.Current(ad, cfg, timeout)
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "%s: %v\n", name, err)
		return exitFailure
	}
	a.print(out, topics.Views(states), func(w io.Writer) { topics.WriteTable(w, states) })
	if err := topics.Check(states); err != nil && apply {
		fmt.Fprintf(a.stderr, "relay topics apply: still wrong (fix these by hand):\n%v\n", err)
		return exitFailure
	}
	return exitOK
}

// applied says what apply changed.
func (a *app) applied(done topics.Applied, asked int) {
	if done.Replication < asked {
		fmt.Fprintf(a.stderr, "relay topics apply: %d broker(s) present; creating with replication factor %d\n", done.Replication, done.Replication)
	}
	for _, t := range done.Created {
		fmt.Fprintf(a.stdout, "created %s\n", t)
	}
	for _, t := range done.Grown {
		fmt.Fprintf(a.stdout, "added partitions to %s\n", t)
	}
}
