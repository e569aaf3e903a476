package main

import (
	"io"
	"os"

	"relay/internal/buildinfo"
	"relay/internal/cli"

	"github.com/spf13/cobra"
)

// app is what every command reads and writes: the environment (the only
// source of configuration) and the standard streams.
type app struct {
	lookup         func(string) (string, bool)
	environ        []string
	stdout, stderr io.Writer
	// signals are the daemon's when its supervisor relays them (nil: the
	// daemon takes the process's own).
	signals <-chan os.Signal
}

const rootLong = `relay — exactly-once ingress stage for Apache Kafka.

Configuration comes from environment variables only (RELAY_*, RELAY_KAFKA_*
passed to librdkafka, OTEL_*), listed in docs/REFERENCE.md. The commands that read
Kafka (topics, quarantine, replay, audit, console) need no RELAY_TRANSACTIONAL_ID.

Exit codes: 0 ok, 1 runtime failure (a crash included), 2 bad command line
or configuration (nothing started, no broker contacted); relay replay adds
3 (stopped by its repeat-failure threshold) and 4 (outcomes not known in
time); relay audit exits 1 on a finding (a record lost, duplicated,
misrouted or stuck) and 3 when it could not complete (no verdict).`

func newRoot(a *app) *cobra.Command {
	root := cli.Group(&cobra.Command{
		Use:     "relay",
		Short:   "exactly-once ingress stage for Apache Kafka",
		Long:    rootLong,
		Version: "relay " + buildinfo.Version,
		// Errors are printed by run, with the exit code they call for.
		SilenceErrors: true,
		SilenceUsage:  true,
	}, a.stderr)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(a.runCmd(), a.configCmd(), a.topicsCmd(), a.quarantineCmd(), a.replayCmd(), a.auditCmd(), a.consoleCmd(), a.probeCmd(), a.versionCmd())
	cli.StderrFlags(root, a.stderr)
	return root
}
