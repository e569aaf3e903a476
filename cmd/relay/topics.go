package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaclient"
	"relay/internal/topics"
)

const topicsUsage = `Usage:
  relay topics plan     show the topics relay needs, what exists, and what apply would create
  relay topics apply    create the missing topics, add partitions to those with fewer than
                        their source (never deletes a topic or changes its settings)

Flags of apply:
  --replication-factor N   replication factor of created topics (default 3, capped at the brokers present)
`

// runTopics is `relay topics plan|apply`.
func runTopics(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "plan" && args[0] != "apply") {
		fmt.Fprint(stderr, topicsUsage)
		return exitUsage
	}
	sub, rest := args[0], args[1:]
	replication := 3
	for len(rest) > 0 {
		switch {
		case sub == "apply" && rest[0] == "--replication-factor" && len(rest) > 1:
			n, err := strconv.Atoi(rest[1])
			if err != nil || n < 1 {
				fmt.Fprintf(stderr, "relay topics apply: --replication-factor %q is not a whole number from 1\n", rest[1])
				return exitUsage
			}
			replication, rest = n, rest[2:]
		default:
			fmt.Fprintf(stderr, "relay topics %s: unexpected argument %q\n\n%s", sub, rest[0], topicsUsage)
			return exitUsage
		}
	}
	cfg, ok := loadConfig(lookup, environ, stderr)
	if !ok {
		return exitUsage
	}
	// A plain producer, for its watermark queries (apply checks with them
	// that what it created serves requests); the admin client shares its
	// connections.
	p, err := kafkaclient.Producer(cfg)
	if err != nil {
		return badClientConfig(cfg, "producer", err, stderr)
	}
	defer p.Close()
	a, err := kafka.NewAdminClientFromProducer(p)
	if err != nil {
		fmt.Fprintf(stderr, "relay topics %s: admin client: %v\n", sub, err)
		return exitFailure
	}
	defer a.Close()
	timeout := max(cfg.OpTimeout, 10*time.Second)
	parts, err := topics.Sources(a, cfg, timeout)
	if err != nil {
		fmt.Fprintf(stderr, "relay topics %s: %v\n", sub, err)
		return exitFailure
	}
	states, err := topics.Inspect(a, topics.Plan(cfg, parts), timeout)
	if err != nil {
		fmt.Fprintf(stderr, "relay topics %s: %v\n", sub, err)
		return exitFailure
	}
	if sub == "apply" {
		md, err := a.GetMetadata(nil, false, int(timeout/time.Millisecond))
		if err == nil && len(md.Brokers) > 0 && len(md.Brokers) < replication {
			fmt.Fprintf(stderr, "relay topics apply: %d broker(s) present; creating with replication factor %d\n", len(md.Brokers), len(md.Brokers))
			replication = len(md.Brokers)
		}
		c, cancel := context.WithTimeout(ctx, 60*time.Second)
		created, err := topics.Apply(c, a, p, states, replication)
		cancel()
		for _, t := range created {
			fmt.Fprintf(stdout, "created %s\n", t)
		}
		if err != nil {
			fmt.Fprintf(stderr, "relay topics apply: %v\n", err)
			return exitFailure
		}
		c, cancel = context.WithTimeout(ctx, 60*time.Second)
		grown, err := topics.Grow(c, a, p, states)
		cancel()
		for _, t := range grown {
			fmt.Fprintf(stdout, "added partitions to %s\n", t)
		}
		if err != nil {
			fmt.Fprintf(stderr, "relay topics apply: %v\n", err)
			return exitFailure
		}
		if states, err = topics.Inspect(a, topics.Plan(cfg, parts), timeout); err != nil {
			fmt.Fprintf(stderr, "relay topics apply: %v\n", err)
			return exitFailure
		}
	}
	printPlan(stdout, states)
	if err := topics.Check(states); err != nil {
		if sub == "apply" {
			fmt.Fprintf(stderr, "relay topics apply: still wrong (fix these by hand):\n%v\n", err)
			return exitFailure
		}
	}
	return exitOK
}

func printPlan(w io.Writer, states []topics.State) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tROLE\tSOURCE\tNEEDS\tHAS\tCONFIG\tSTATUS")
	for _, s := range states {
		status := "ok"
		if p := s.Problem(); p != "" {
			status = p
		}
		has := strconv.Itoa(s.Have)
		if s.Have == 0 {
			has = "-"
		}
		conf := ""
		for _, k := range []string{"cleanup.policy", "retention.ms"} {
			if v, ok := s.Configs[k]; ok {
				if k == "retention.ms" {
					n, _ := strconv.ParseInt(v, 10, 64)
					v = (time.Duration(n) * time.Millisecond).String()
				}
				conf += k + "=" + v + " "
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", s.Name, s.Role, s.Source, s.Partitions, has, conf, status)
	}
	_ = tw.Flush()
}
