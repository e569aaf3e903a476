package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"relay/internal/checks"
	"relay/internal/config"
	"relay/internal/console"
	"relay/internal/daemon"
	"relay/internal/schema"
	"relay/internal/secret"
)

const consoleLong = `Serves the web console over the quarantine at RELAY_CONSOLE_ADDR
(127.0.0.1:9465 by default): per source, the unresolved failures by code
and state, the oldest, the retention headroom, the owner and alert
threshold, the replays and the last audit; the failures, filtered and paged;
one failure's envelope, headers, decoded payload (redacted) and ledger
history; and the actions — discard, replay dry run, sample, replay at a
rate with live progress and a stop button — each recorded in the ledger
with the actor and a reason, through the same code as relay quarantine and
relay replay.

Reading needs nothing. Acting needs RELAY_CONSOLE_TOKEN (an operator signs
in with it and their name), or an authenticating proxy at
RELAY_CONSOLE_TRUSTED_PROXIES naming the user in RELAY_CONSOLE_USER_HEADER.
Without either the console is read-only. Serve it to other hosts only
behind TLS (an ingress).

Stops on SIGINT or SIGTERM; a replay in progress is interrupted as relay
replay is on Ctrl-C (what was published stays replaying; relay settles it).`

func (a *app) consoleCmd() *cobra.Command {
	var addr string
	c := &cobra.Command{
		Use:   "console",
		Short: "the web console: the quarantine, its replays and its audit in a browser",
		Long:  consoleLong,
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return status(a.console(c.Context(), addr))
		},
	}
	c.Flags().StringVar(&addr, "addr", "", "listen address (default RELAY_CONSOLE_ADDR)")
	return c
}

func (a *app) console(ctx context.Context, addr string) int {
	o, code := a.setup()
	if code != exitOK {
		return code
	}
	defer o.admin.Close()
	cfg := o.cfg
	if addr == "" {
		addr = cfg.Console.Addr
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		fmt.Fprintf(a.stderr, "relay console: %s (or --addr) %q: %v\n", config.EnvConsoleAddr, addr, err)
		return exitUsage
	}
	if code := a.fitTransactionTimeout(ctx, o, "relay console", "the console did not start"); code != exitOK {
		return code
	}
	log := daemon.NewLogger(cfg, a.stderr).With("component", "console")
	var reg *schema.Client
	if cfg.SchemaRegistryURL != "" {
		r, err := checks.RegistryClient(cfg)
		if err != nil {
			fmt.Fprintf(a.stderr, "relay console: %v\n", err)
			return exitUsage
		}
		reg = r
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		fmt.Fprintf(a.stderr, "relay console: cannot listen on %s (%s): %v\n", addr, config.EnvConsoleAddr, err)
		return exitFailure
	}
	opts := console.Options{Config: cfg, Admin: o.admin, Registry: reg, Log: log}
	if loopback(ln.Addr()) {
		// On loopback, the console answers only to loopback's names: a
		// page of another site rebinding its name to 127.0.0.1 is refused.
		host, _, _ := net.SplitHostPort(addr)
		opts.AllowedHosts = []string{"localhost", "127.0.0.1", "::1"}
		if host != "" {
			opts.AllowedHosts = append(opts.AllowedHosts, host)
		}
	}
	srv, err := console.New(opts)
	if err != nil {
		_ = ln.Close()
		fmt.Fprintf(a.stderr, "relay console: %v\n", err)
		return exitFailure
	}
	defer srv.Close() // on every way out; a second Close returns at once
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cfg.Console.Token != nil && cfg.Console.Token.File != "" {
		go secret.Watch(ctx, []*secret.Value{cfg.Console.Token}, 5*time.Second, nil, func(*secret.Value) {}, log)
	}
	for _, p := range cfg.Console.TrustedProxies {
		if p.Contains(netip.MustParseAddr("127.0.0.1")) || p.Contains(netip.IPv6Loopback()) {
			log.Warn("RELAY_CONSOLE_TRUSTED_PROXIES includes loopback: any local process can name itself in " + cfg.Console.UserHeader)
		}
	}
	switch {
	case cfg.Console.Token == nil && cfg.Console.UserHeader == "":
		log.Info("read-only: set RELAY_CONSOLE_TOKEN, or a trusted proxy, to allow actions")
	case !loopback(ln.Addr()):
		log.Warn("the console listens beyond this host: serve it behind TLS (an ingress), or the token and sessions cross the network in clear")
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("relay console listening", "addr", ln.Addr().String(), "sources", cfg.SourceTopics)
	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(a.stderr, "relay console: %v\n", err)
			return exitFailure
		}
	case <-ctx.Done():
	}
	// Replays first: their pages' event streams end with them, so the
	// server's shutdown does not wait for those.
	srv.Close()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = hs.Shutdown(c)
	log.Info("relay console stopped")
	return exitOK
}

func loopback(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().IsLoopback()
}
