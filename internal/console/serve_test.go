package console

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"relay/internal/config"
)

// SIGHUP never stops the console: it reads the secret files again at once
// (a rotated token applies before the next periodic check), and the
// console goes on serving until its context ends.
func TestSIGHUPReloadsSecretsAndKeepsServing(t *testing.T) {
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte("the-first-token-of-20\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, map[string]string{config.EnvConsoleToken: unset, config.EnvConsoleToken + "_FILE": f})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Options{Config: s.cfg, Log: slog.New(slog.DiscardHandler)}, "") }()
	base := "http://" + ln.Addr().String()
	waitUp := func() {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if r, err := http.Get(base + "/healthz"); err == nil {
				_ = r.Body.Close()
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the console does not answer")
			}
		}
	}
	waitUp()
	if err := os.WriteFile(f, []byte("the-rotated-token-of-20\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); s.cfg.Console.Token.Get() != "the-rotated-token-of-20"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after SIGHUP the token is still %q", s.cfg.Console.Token.Get())
		}
	}
	waitUp()
	select {
	case err := <-done:
		t.Fatalf("the console stopped on SIGHUP: %v", err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The authenticating proxy of the console's pod talks to it over a Unix
// socket, where its user header is believed; over TCP, even from
// 127.0.0.1 (a kubectl port-forward arrives there), the header names no
// one (found by an attack: a port-forward acted as anyone).
func TestTheUserHeaderOnlyOnTheProxySocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	s := newTestServer(t, map[string]string{config.EnvConsoleTrustedProxy: unset, config.EnvConsoleTrustUnsigned: unset,
		config.EnvConsoleProxySocket: sock, config.EnvConsoleForwardedBy: "10.244.0.0/16", config.EnvConsoleReadAuth: "signed-in"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Options{Config: s.cfg, Log: slog.New(slog.DiscardHandler)}, "") }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	overSocket := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	ask := func(c *http.Client, base string) int {
		req, _ := http.NewRequest(http.MethodGet, base+"/nope", nil)
		req.Header.Set("X-Forwarded-User", "ceo@corp")
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			resp, err := c.Do(req)
			if err == nil {
				_ = resp.Body.Close()
				return resp.StatusCode
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
		}
	}
	if code := ask(overSocket, "http://localhost"); code != http.StatusNotFound {
		t.Errorf("the proxy's user over the socket: %d, want the page's own answer (signed in)", code)
	}
	if code := ask(http.DefaultClient, "http://"+ln.Addr().String()); code != http.StatusUnauthorized {
		t.Errorf("the user header over TCP from 127.0.0.1: %d, want 401 (nobody)", code)
	}
	// Behind the ingress (a forwarder), the client is the one it forwarded for.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r = r.WithContext(context.WithValue(r.Context(), proxySocket{}, true))
	r.Header.Set("X-Forwarded-For", "203.0.113.9, 10.244.3.7")
	if got := s.auth.client(r); got != "203.0.113.9" {
		t.Errorf("the client behind the ingress and the sidecar: %s, want 203.0.113.9", got)
	}
}

// Pentest finding: open reads beyond loopback with no allowed hosts were
// a warning; any page a reader opened could rebind its name to the
// console and read every failure. Refused at start unless
// RELAY_CONSOLE_INSECURE says otherwise.
func TestOpenReadsBeyondLoopbackNeedTheirHosts(t *testing.T) {
	for insecure, refused := range map[string]bool{unset: true, "true": false} {
		s := newTestServer(t, map[string]string{config.EnvConsoleReadAuth: "open", config.EnvConsoleInsecure: insecure})
		ln, err := net.Listen("tcp", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err = Serve(ctx, ln, Options{Config: s.cfg, Log: slog.New(slog.DiscardHandler)}, "")
		cancel()
		_ = ln.Close()
		if got := err != nil && strings.Contains(err.Error(), config.EnvConsoleAllowedHosts); got != refused {
			t.Errorf("%s=%s: Serve = %v; refused %v, want %v", config.EnvConsoleInsecure, insecure, err, got, refused)
		}
	}
}

// The chart's sidecar shape: the console on loopback, its proxy on the
// socket, and a second listener for the kubelet and Prometheus that
// serves /healthz and /metrics and nothing else. A console on loopback
// with a proxy socket still serves people from elsewhere: its reads need
// sign-in by default, as beyond loopback (on plain loopback they are open).
func TestLoopbackBehindTheSocketWithAMetricsListener(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	probe, err := net.Listen("tcp", "127.0.0.1:0") // a free port for the metrics listener
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := probe.Addr().String()
	_ = probe.Close()
	s := newTestServer(t, map[string]string{config.EnvConsoleTrustedProxy: unset, config.EnvConsoleTrustUnsigned: unset,
		config.EnvConsoleProxySocket: sock, config.EnvConsoleReadAuth: unset, config.EnvConsoleMetricsAddr: metricsAddr})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, Options{Config: s.cfg, Log: slog.New(slog.DiscardHandler)}, "") }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	get := func(url string) (int, string) {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			resp, err := http.Get(url)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				return resp.StatusCode, string(b)
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
		}
	}
	if code, _ := get("http://" + metricsAddr + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz on %s: %d", config.EnvConsoleMetricsAddr, code)
	}
	if code, body := get("http://" + metricsAddr + "/metrics"); code != http.StatusOK || !strings.Contains(body, "relay_console_wrong_tokens_total") {
		t.Errorf("/metrics on %s: %d %.200q", config.EnvConsoleMetricsAddr, code, body)
	}
	for _, p := range []string{"/", "/failures", "/failure?topic=orders.quarantine&partition=0&offset=0", "/login", "/static/console.css"} {
		if code, _ := get("http://" + metricsAddr + p); code != http.StatusNotFound {
			t.Errorf("%s on %s: %d, want 404 (only /healthz and /metrics there)", p, config.EnvConsoleMetricsAddr, code)
		}
	}
	if code, _ := get("http://" + ln.Addr().String() + "/failures"); code != http.StatusUnauthorized {
		t.Errorf("/failures on loopback behind the proxy socket, signed out: %d, want 401 (reads need sign-in)", code)
	}
}
