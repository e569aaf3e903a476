package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/cli"
	"relay/internal/config"
	"relay/internal/daemon"
	"relay/internal/kafkaclient"
	"relay/internal/quarantine"
	"relay/internal/replay"
)

// ops is an operator command's configuration and admin client.
type ops struct {
	cfg   *config.Config
	admin *kafka.AdminClient
}

// setup loads the configuration and an admin client for an operator
// command; a non-zero code is what the command must stop with.
func (a *app) setup() (*ops, int) {
	cfg, ok := cli.LoadConfig(config.ForOperators(a.lookup), a.environ, a.stderr)
	if !ok {
		return nil, cli.Usage
	}
	ad, err := kafkaclient.Admin(cfg)
	if err != nil {
		return nil, daemonExit(daemon.ClientConfigError(cfg, "admin", err), a.stderr)
	}
	return &ops{cfg: cfg, admin: ad}, cli.OK
}

// withIndex runs an operator command's body on a fresh index of the
// ledger and the quarantine (of failure only, when set); it returns the
// body's exit code, or the setup's or the read's.
func (a *app) withIndex(ctx context.Context, name, only string, body func(o *ops, r *quarantine.Reader) int) int {
	o, code := a.setup()
	if code != cli.OK {
		return code
	}
	defer o.admin.Close()
	r := quarantine.NewReader(o.cfg, o.admin, only)
	if err := r.CatchUp(ctx); err != nil {
		fmt.Fprintf(a.stderr, "%s: %v\n", name, err)
		return cli.Failure
	}
	if err := r.Index().Warning(); err != nil {
		fmt.Fprintf(a.stderr, "warning: %v\n", err)
	}
	return body(o, r)
}

// fitTransactionTimeout checks, for a command that writes transactions,
// transaction.timeout.ms against the broker's maximum as relay run does:
// the broker would refuse the producer with a message naming neither the
// variable nor the limit. A non-zero code is what the command must stop
// with, having said why.
func (a *app) fitTransactionTimeout(ctx context.Context, o *ops, name, nothing string) int {
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := kafkaclient.FitForCommand(ctx, o.admin, o.cfg, log); err != nil {
		fmt.Fprintf(a.stderr, "%s: %v\n%s\n", name, err, nothing)
		return cli.Usage
	}
	return cli.OK
}

// codeOf is the exit code of an operator command's error: bad input is 2.
func codeOf(err error) int {
	var in *quarantine.InputError
	var re *replay.RulesError
	if errors.As(err, &in) || errors.As(err, &re) {
		return cli.Usage
	}
	return cli.Failure
}

// print writes v as one JSON document with -o json, else as text writes it.
func (a *app) print(out cli.Output, v any, text func(w io.Writer)) { cli.Print(a.stdout, out, v, text) }
