package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"relay/internal/config"
	"relay/internal/daemon"
	"relay/internal/rules"
	"relay/internal/schema"
	"relay/internal/tiers"
)

// runDaemon is `relay run`: it loads the configuration, runs the daemon and
// turns how it ended into the exit code.
func runDaemon(ctx context.Context, lookup func(string) (string, bool), environ []string, stderr io.Writer) int {
	cfg, ok := loadConfig(lookup, environ, stderr)
	if !ok {
		return exitUsage
	}
	err := daemon.Run(ctx, cfg, daemon.Options{
		Environ: environ,
		Go:      goGuarded,
		// A second signal, or a graceful stop past its bound.
		Abandon: func() { os.Exit(exitFailure) },
	}, newLogger(cfg, stderr))
	return daemonExit(err, stderr)
}

// daemonExit is the exit code of how the daemon ended: 0 for a graceful
// stop, 2 for a configuration it refused (printed here), 1 for a runtime
// failure (the daemon has logged it).
func daemonExit(err error, stderr io.Writer) int {
	var ce *daemon.ConfigError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "relay: invalid configuration:\n  %v\n", ce)
		return exitUsage
	default:
		return exitFailure
	}
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// clientConfigError reports librdkafka's rejection of a property as a
// configuration error naming the variable.
func clientConfigError(cfg *config.Config, client string, err error, stderr io.Writer) int {
	return daemonExit(daemon.ClientConfigError(cfg, client, err), stderr)
}

// relay replay's dry run checks records with the daemon's own rules,
// admission and retry policy.

func loadRules(cfg *config.Config) (*rules.Set, error) { return daemon.LoadRules(cfg) }

func ruleCount(s *rules.Set) int { return daemon.RuleCount(s) }

func newAdmitter(ctx context.Context, cfg *config.Config, log *slog.Logger) (*schema.Admitter, error) {
	return daemon.NewAdmitter(ctx, cfg, log)
}

func policy(cfg *config.Config) tiers.Policy { return daemon.Policy(cfg) }
