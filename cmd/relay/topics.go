package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
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
	var principal string
	acls := &cobra.Command{
		Use:   "acls [run|topics|quarantine|replay|audit]",
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
			return status(a.acls(args, principal, out))
		},
	}
	acls.Flags().StringVar(&principal, "principal", "", "print kafka-acls.sh commands granting the ACLs to this principal (e.g. User:relay)")
	outputFlag(acls, &out, false)
	c.AddCommand(plan, apply, acls)
	return c
}

// acls is `relay topics acls`.
func (a *app) acls(args []string, principal string, out output) int {
	cfg, ok := loadConfig(config.ForOperators(a.lookup), a.environ, a.stderr)
	if !ok {
		return exitUsage
	}
	commands := topics.Commands
	if len(args) == 1 {
		commands = args
	}
	type row struct {
		For string `json:"command"`
		topics.ACL
	}
	var rows []row
	for _, cmd := range commands {
		list, err := topics.ACLs(cfg, cmd)
		if err != nil {
			fmt.Fprintf(a.stderr, "relay topics acls: %v\n", err)
			return exitUsage
		}
		for _, acl := range list {
			if acl.Resource == "TransactionalId" && !acl.Prefixed {
				// Run without the instance's identity: say what goes there.
				if v, ok := a.lookup(config.EnvTransactionalID); !ok || v == "" {
					acl.Name = "$" + config.EnvTransactionalID
				}
			}
			rows = append(rows, row{cmd, acl})
		}
	}
	switch {
	case out == outJSON:
		if err := writeJSON(a.stdout, rows); err != nil {
			fmt.Fprintf(a.stderr, "relay topics acls: %v\n", err)
			return exitFailure
		}
		return exitOK
	case principal != "":
		if !strings.HasPrefix(principal, "User:") {
			fmt.Fprintf(a.stderr, "relay topics acls: --principal %q: a principal is User:<name>\n", principal)
			return exitUsage
		}
		seen := map[string]bool{}
		for _, r := range rows {
			line := r.Command(principal)
			if !seen[line] {
				seen[line] = true
				fmt.Fprintln(a.stdout, line)
			}
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMMAND\tRESOURCE\tPATTERN\tNAME\tOPERATION\tWHY")
	for _, r := range rows {
		pattern := "literal"
		if r.Prefixed {
			pattern = "prefixed"
		}
		why := r.Why
		if r.Optional {
			why = "optional: " + why
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.For, r.Resource, pattern, r.Name, r.Operation, why)
	}
	_ = tw.Flush()
	return exitOK
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
