package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"relay/internal/cli"
	"relay/internal/daemon"
)

// runDaemon is `relay run`: it loads the configuration, runs the daemon and
// turns how it ended into the exit code.
func runDaemon(ctx context.Context, lookup func(string) (string, bool), environ []string, signals <-chan os.Signal, stderr io.Writer) int {
	cfg, ok := cli.LoadConfig(lookup, environ, stderr)
	if !ok {
		return cli.Usage
	}
	return daemonExit(daemon.Run(ctx, cfg, daemon.Options{
		Environ: environ,
		Go:      func(f func()) { cli.GoGuarded(f, os.Exit) },
		Signals: signals,
		// A second signal, or a graceful stop past its bound.
		Abandon: func() { os.Exit(cli.Failure) },
	}, daemon.NewLogger(cfg, stderr)), stderr)
}

// daemonExit is the exit code of how the daemon ended: 0 for a graceful
// stop, 2 for a configuration it refused (printed here), 1 for a runtime
// failure (the daemon has logged it).
func daemonExit(err error, stderr io.Writer) int {
	var ce *daemon.ConfigError
	switch {
	case err == nil:
		return cli.OK
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "relay: invalid configuration:\n  %v\n", ce)
		return cli.Usage
	default:
		return cli.Failure
	}
}
