package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaclient"
)

// cliLookup lets operator commands run with the daemon's environment or
// without its instance identity: they need no transactional id.
func cliLookup(lookup func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := lookup(name)
		if name == config.EnvTransactionalID && (!ok || v == "") {
			return "relay-cli", true
		}
		return v, ok
	}
}

// parseInterspersed parses flags that may come before, between or after
// positional arguments, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// newFlags is a flag set that reports its errors, with usage, on stderr.
func newFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	return fs
}

// ops is an operator command's configuration and admin client.
type ops struct {
	cfg   *config.Config
	admin *kafka.AdminClient
}

// opsSetup loads the configuration and an admin client for an operator
// command; a non-zero code is what the command must stop with.
func opsSetup(lookup func(string) (string, bool), environ []string, stderr io.Writer) (*ops, int) {
	cfg, ok := loadConfig(cliLookup(lookup), environ, stderr)
	if !ok {
		return nil, exitUsage
	}
	a, err := kafkaclient.Admin(cfg)
	if err != nil {
		return nil, badClientConfig(cfg, "admin", err, stderr)
	}
	return &ops{cfg: cfg, admin: a}, exitOK
}

func (o *ops) close() { o.admin.Close() }

// badClientConfig reports librdkafka's rejection of a property as a
// configuration error naming the variable.
func badClientConfig(cfg *config.Config, client string, err error, stderr io.Writer) int {
	var ce *kafkaclient.ConfigError
	if !errors.As(err, &ce) {
		ce = kafkaclient.AsConfigError(cfg, client, err)
	}
	fmt.Fprintf(stderr, "relay: invalid configuration:\n  %v\n", ce)
	return exitUsage
}
