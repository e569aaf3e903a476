package console

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
