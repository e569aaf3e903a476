package console

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"relay/internal/config"
	"relay/internal/secret"
)

// Serve runs the console on ln until ctx ends (nil then) or the listener
// fails: it keeps a token read from a file current, warns of a setting
// that exposes it, and on the way out stops the replays it started before
// it shuts the server down. On loopback, with no AllowedHosts given, it
// answers only to loopback's names (and the listen address's host): a page
// of another site rebinding its name to 127.0.0.1 is refused.
func Serve(ctx context.Context, ln net.Listener, o Options, listenHost string) error {
	cfg, log := o.Config, o.Log
	// Behind an authenticating proxy on the socket, a console on loopback
	// still serves people from elsewhere: it is held to the rules of a
	// console beyond this host (sign-in to read, Secure cookies).
	onLoopback := Loopback(ln.Addr()) && cfg.Console.ProxySocket == ""
	o.Loopback = onLoopback
	if o.AllowedHosts == nil {
		o.AllowedHosts = cfg.Console.AllowedHosts
	}
	if onLoopback && o.AllowedHosts == nil {
		o.AllowedHosts = []string{"localhost", "127.0.0.1", "::1"}
		if listenHost != "" {
			o.AllowedHosts = append(o.AllowedHosts, listenHost)
		}
	}
	if !onLoopback && !cfg.Console.Insecure && cfg.Console.ReadAuth == "open" && len(o.AllowedHosts) == 0 {
		_ = ln.Close()
		return fmt.Errorf("%s=open beyond loopback without %s: any web page a reader opens could rebind its name to this console and read every failure; name the console's hosts, or set %s=true to accept that",
			config.EnvConsoleReadAuth, config.EnvConsoleAllowedHosts, config.EnvConsoleInsecure)
	}
	srv, err := New(o)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer srv.Close() // on every way out; a second Close returns at once
	watchSecrets(ctx, o)
	if cfg.Console.UserHeader != "" && len(cfg.Console.TrustedProxies) > 0 {
		// Loopback is refused by the configuration; any other address
		// still arrives by means the console cannot see.
		log.Warn("the user header is believed from the addresses of RELAY_CONSOLE_TRUSTED_PROXIES: anyone whose requests arrive from them acts as whom the header names (a kubectl port-forward to that proxy, a process on its host); an authenticating proxy in this pod belongs on RELAY_CONSOLE_PROXY_SOCKET",
			"trusted", fmt.Sprint(cfg.Console.TrustedProxies))
	}
	if len(o.AllowedHosts) == 0 {
		log.Warn("the console answers to any Host name: set RELAY_CONSOLE_ALLOWED_HOSTS to its own (DNS rebinding)")
	}
	if cfg.Console.UserHeader != "" && cfg.Console.TrustUnsigned {
		log.Warn("RELAY_CONSOLE_TRUST_UNSIGNED_HEADER=true: any pod in RELAY_CONSOLE_TRUSTED_PROXIES can set " + cfg.Console.UserHeader + " and act as anyone")
	}
	for _, u := range cfg.InsecureCredentialURLs() { // only with RELAY_ALLOW_INSECURE_HTTP=true
		log.Warn("credentials go over plain http:// (RELAY_ALLOW_INSECURE_HTTP=true): anyone on the way reads them", "var", u.Var, "sends", u.What)
	}
	log.Info("who may read", "signed_in_only", cfg.Console.ReadsSignedIn(onLoopback))
	switch {
	case cfg.Console.Token == nil && cfg.Console.UserHeader == "":
		log.Info("read-only: set RELAY_CONSOLE_TOKEN, or a trusted proxy, to allow actions")
	case !Loopback(ln.Addr()):
		log.Warn("the console listens beyond this host: serve it behind TLS (an ingress), or the token and sessions cross the network in clear")
	}
	// No WriteTimeout: a replay's progress streams for as long as it runs
	// (bounded in number instead, see streams).
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		// A connection on the proxy's socket is the proxy's: its user
		// header is believed there, and nowhere else but from
		// RELAY_CONSOLE_TRUSTED_PROXIES.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if _, ok := c.(*net.UnixConn); ok {
				return context.WithValue(ctx, proxySocket{}, true)
			}
			return ctx
		}}
	served := make(chan error, 3)
	go func() { served <- hs.Serve(ln) }()
	if addr := cfg.Console.MetricsAddr; addr != "" {
		mln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("cannot listen on %s (%s): %w", addr, config.EnvConsoleMetricsAddr, err)
		}
		ms := &http.Server{Handler: srv.HealthHandler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
		defer func() { _ = ms.Close() }()
		go func() { served <- ms.Serve(mln) }()
		log.Info("relay console serving /healthz and /metrics", "addr", mln.Addr().String())
	}
	if path := cfg.Console.ProxySocket; path != "" {
		sock, err := listenSocket(ctx, path)
		if err != nil {
			_ = ln.Close()
			return err
		}
		go func() { served <- hs.Serve(sock) }()
		log.Info("relay console listening for its authenticating proxy", "socket", path)
	}
	log.Info("relay console listening", "addr", ln.Addr().String(), "sources", cfg.SourceTopics)
	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
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
	return nil
}

// watchSecrets keeps the secrets read from files current, as relay run
// does: every few seconds, and at once on SIGHUP, which never stops the
// console. A new SASL password reaches the admin client the console
// holds; the readers it builds for each snapshot read the files' values
// when they are built.
func watchSecrets(ctx context.Context, o Options) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{}, 1)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				o.Log.Info("SIGHUP: reading the secret files again; the rest of the console's configuration is fixed for the life of the process")
				select {
				case reload <- struct{}{}:
				default:
				}
			}
		}
	}()
	cfg := o.Config
	sasl, _ := o.Admin.(interface{ SetSaslCredentials(user, pass string) error })
	changed := func(v *secret.Value) {
		user, pass, of := cfg.SASLCredentials(v)
		if sasl == nil || !of {
			return
		}
		if err := sasl.SetSaslCredentials(user, pass); err != nil {
			o.Log.Warn("cannot give the admin client the new SASL credentials; it keeps the old ones until the console restarts", "err", err)
		}
	}
	go secret.Watch(ctx, cfg.FileSecrets(), secret.WatchInterval, reload, changed, o.Log)
}

// listenSocket listens on the Unix socket at path (a stale one from an
// earlier run removed), readable and writable by the pod's user and group
// only.
func listenSocket(ctx context.Context, path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("%s %s: %w", config.EnvConsoleProxySocket, path, err)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", config.EnvConsoleProxySocket, path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("%s %s: %w", config.EnvConsoleProxySocket, path, err)
	}
	return ln, nil
}

// Loopback says whether a is a loopback address.
func Loopback(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	return err == nil && ap.Addr().IsLoopback()
}
