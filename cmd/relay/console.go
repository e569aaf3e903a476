package main

import (
	"context"
	"fmt"
	"net"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"relay/internal/checks"
	"relay/internal/cli"
	"relay/internal/config"
	"relay/internal/console"
	"relay/internal/daemon"
	"relay/internal/schema"
)

func (a *app) consoleCmd() *cobra.Command {
	var addr string
	c := &cobra.Command{
		Use:   "console",
		Short: "the web console: the quarantine, its replays and its audit in a browser",
		Long:  console.Help,
		Args:  cli.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return cli.Status(a.console(c.Context(), addr))
		},
	}
	c.Flags().StringVar(&addr, "addr", "", "listen address (default RELAY_CONSOLE_ADDR)")
	return c
}

func (a *app) console(ctx context.Context, addr string) int {
	o, code := a.setup()
	if code != cli.OK {
		return code
	}
	defer o.admin.Close()
	cfg := o.cfg
	if addr == "" {
		addr = cfg.Console.Addr
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		fmt.Fprintf(a.stderr, "relay console: %s (or --addr) %q: %v\n", config.EnvConsoleAddr, addr, err)
		return cli.Usage
	}
	if code := a.fitTransactionTimeout(ctx, o, "relay console", "the console did not start"); code != cli.OK {
		return code
	}
	log := daemon.NewLogger(cfg, a.stderr).With("component", "console")
	var reg *schema.Client
	if cfg.SchemaRegistryURL != "" {
		r, err := checks.RegistryClient(cfg)
		if err != nil {
			fmt.Fprintf(a.stderr, "relay console: %v\n", err)
			return cli.Usage
		}
		reg = r
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		fmt.Fprintf(a.stderr, "relay console: cannot listen on %s (%s): %v\n", addr, config.EnvConsoleAddr, err)
		return cli.Failure
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	host, _, _ := net.SplitHostPort(addr)
	if err := console.Serve(ctx, ln, console.Options{Config: cfg, Admin: o.admin, Registry: reg, Log: log}, host); err != nil {
		fmt.Fprintf(a.stderr, "relay console: %v\n", err)
		return cli.Failure
	}
	return cli.OK
}
