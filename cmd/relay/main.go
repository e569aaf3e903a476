// Command relay is the single ingress stage in front of the business
// consumers of Apache Kafka: every source record reaches a known state in the
// same Kafka transaction that commits its source offset.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // runtime failure: fenced, broker unusable, preflight failed, a crash
	exitUsage   = 2 // bad command line or configuration; nothing was started
)

const usage = `relay — exactly-once ingress stage for Apache Kafka

Usage:
  relay run       run the daemon (consume, decide, produce, commit in one transaction)
  relay config    print the effective configuration, secrets masked
  relay topics plan|apply
                  show or create the topics relay needs (output, retry tiers,
                  quarantine, rejected, replay, state)
  relay quarantine list|show|stats|discard
                  the quarantine as an operational queue: what failed, since
                  when, how close to retention; close failures with a reason
  relay replay --reason TEXT <selection> [--dry-run] [--sample N] [--rate R]
                  replay quarantined records through relay, rate-limited and
                  recorded in the ledger (relay replay --help)
  relay help      show this help

Configuration comes from environment variables only (RELAY_*, RELAY_KAFKA_*
passed to librdkafka, OTEL_*); see the README. Exit codes: 0 ok, 1 runtime
failure (a crash included), 2 bad command line or configuration; relay
replay adds 3 (stopped by its repeat-failure threshold) and 4 (outcomes not
known in time).
`

func main() {
	os.Exit(guarded(os.Stderr, func() int {
		return run(context.Background(), os.Args[1:], os.LookupEnv, os.Environ(), os.Stdout, os.Stderr)
	}))
}

// run dispatches a command and returns the process exit code. Only main
// exits.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "relay run: unexpected argument %q (configuration comes from the environment)\n", args[1])
			return exitUsage
		}
		return runDaemon(ctx, lookup, environ, stderr)
	case "config":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "relay config: unexpected argument %q\n", args[1])
			return exitUsage
		}
		return printConfig(lookup, environ, stdout, stderr)
	case "topics":
		return runTopics(ctx, args[1:], cliLookup(lookup), environ, stdout, stderr)
	case "quarantine":
		return runQuarantine(ctx, args[1:], lookup, environ, stdout, stderr)
	case "replay":
		return runReplay(ctx, args[1:], lookup, environ, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "relay: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}
