package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/spf13/cobra"

	"relay/internal/cli"
	"relay/internal/config"
	"relay/internal/daemon"
	"relay/internal/kafkaclient"
	"relay/internal/topics"
)

func (a *app) topicsCmd() *cobra.Command {
	c := cli.Group(&cobra.Command{
		Use:   "topics",
		Short: "show or create the topics relay needs (output, retry tiers, quarantine, rejected, replay, state)",
	}, a.stderr)
	var out cli.Output
	plan := &cobra.Command{
		Use:   "plan",
		Short: "show the topics relay needs, what exists, and what apply would create",
		Long: `Shows the topics relay needs, what exists, what apply would create, and
each topic's replicas and min.insync.replicas, marking one "at risk" that
one broker's loss could hurt. With -o json, one JSON array of the topics.`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return cli.Status(a.topics(c.Context(), false, 0, out))
		},
	}
	cli.OutputFlag(plan, &out, false)
	replication := 3
	apply := &cobra.Command{
		Use:   "apply",
		Short: "create the missing topics, add partitions to those with fewer than their source",
		Long: `Creates the missing topics (with 3 or more replicas, min.insync.replicas
one below them), adds partitions to those with fewer than their source, and
raises min.insync.replicas from 1 to 2 on relay's topics of 3 or more
replicas. It never deletes a topic, touches a source, or changes another setting.`,
		Args: cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if replication < 1 {
				return fmt.Errorf("--replication-factor %d: not a whole number from 1", replication)
			}
			return cli.Status(a.topics(c.Context(), true, replication, cli.Table))
		},
	}
	apply.Flags().IntVar(&replication, "replication-factor", 3, "replication factor of created topics (capped at the brokers present)")
	var principal string
	acls := &cobra.Command{
		Use:   "acls [run|topics|quarantine|replay|audit|console]",
		Short: "list the Kafka ACLs relay's principal needs, per command",
		Long: `Lists the least a principal needs on a cluster with an authorizer to run
each relay command with this configuration (all of them without an
argument): every topic by its name, the groups and the operator commands'
transactional ids by the prefix RELAY_GROUP_ID, the instance's
transactional id by its name. Read, Write and Alter imply Describe.
With --principal, the kafka-acls.sh commands that grant them instead.
relay run checks them at start-up and names any that is missing.`,
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: topics.Commands,
		RunE: func(c *cobra.Command, args []string) error {
			return cli.Status(a.acls(args, principal, out))
		},
	}
	acls.Flags().StringVar(&principal, "principal", "", "print kafka-acls.sh commands granting the ACLs to this principal (e.g. User:relay)")
	cli.OutputFlag(acls, &out, false)
	c.AddCommand(plan, apply, acls)
	return c
}

// acls is `relay topics acls`.
func (a *app) acls(args []string, principal string, out cli.Output) int {
	cfg, ok := cli.LoadConfig(config.ForOperators(a.lookup), a.environ, a.stderr)
	if !ok {
		return cli.Usage
	}
	id, _ := a.lookup(config.EnvTransactionalID)
	gs, err := topics.Grants(cfg, args, id != "")
	if err == nil && principal != "" && out == cli.Table {
		err = topics.WriteGrantCommands(a.stdout, gs, principal)
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "relay topics acls: %v\n", err)
		return cli.Usage
	}
	if principal == "" || out != cli.Table {
		a.print(out, gs, func(w io.Writer) { topics.WriteGrants(w, gs) })
	}
	return cli.OK
}

// topics is `relay topics plan` and, with apply, `relay topics apply`.
func (a *app) topics(ctx context.Context, apply bool, replication int, out cli.Output) int {
	name := "relay topics plan"
	if apply {
		name = "relay topics apply"
	}
	cfg, ok := cli.LoadConfig(config.ForOperators(a.lookup), a.environ, a.stderr)
	if !ok {
		return cli.Usage
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
		return cli.Failure
	}
	defer ad.Close()
	timeout := max(cfg.OpTimeout, 10*time.Second)
	var states []topics.State
	if apply {
		var done topics.Applied
		states, done, err = topics.Reconcile(ctx, ad, p, cfg, replication, timeout)
		a.applied(done, replication)
	} else {
		states, err = topics.Current(ctx, ad, cfg, timeout)
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "%s: %v\n", name, err)
		return cli.Failure
	}
	a.print(out, topics.Views(states), func(w io.Writer) { topics.WriteTable(w, states) })
	if err := topics.Check(states); err != nil && apply {
		fmt.Fprintf(a.stderr, "relay topics apply: still wrong (fix these by hand):\n%v\n", err)
		return cli.Failure
	}
	return cli.OK
}

// applied says what apply changed.
func (a *app) applied(done topics.Applied, asked int) {
	if done.Replication < asked {
		fmt.Fprintf(a.stderr, "relay topics apply: %d broker(s) present; creating with replication factor %d\n", done.Replication, done.Replication)
	}
	for _, line := range done.Lines() {
		fmt.Fprintln(a.stdout, line)
	}
}
