package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"relay/internal/config"
	"relay/internal/txn"
)

// runOnce runs the daemon with the variables vars on top of a minimal
// configuration whose broker accepts no connection, and returns its log
// and error.
func runOnce(t *testing.T, vars map[string]string) (string, error) {
	t.Helper()
	m := map[string]string{"RELAY_SOURCE_TOPICS": "orders", "RELAY_TRANSACTIONAL_ID": "relay-0",
		"RELAY_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "RELAY_HTTP_ADDR": ""}
	for k, v := range vars {
		m[k] = v
	}
	lookup, environ := env(m)
	cfg, err := config.Load(lookup, environ)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	abandon := func() { t.Error("a stop was abandoned") }
	err = Run(context.Background(), cfg, Options{Environ: environ, Abandon: abandon}, slog.New(slog.NewTextHandler(&logs, nil)))
	return logs.String(), err
}

// What relay refuses before it starts anything is a *ConfigError naming
// what is wrong (exit 2); a taken metrics port is a runtime failure
// (exit 1), logged.
func TestRunErrors(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("rules:\n  - name: X\n    expr: record.amount <\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	for _, tc := range []struct {
		name   string
		vars   map[string]string
		config bool
		want   string
	}{
		{"librdkafka property", map[string]string{"RELAY_KAFKA_NO_SUCH_THING": "1"}, true, "RELAY_KAFKA_NO_SUCH_THING"},
		{"rules file", map[string]string{"RELAY_RULES_FILE": rules, "RELAY_SCHEMA_REGISTRY_URL": "http://127.0.0.1:1",
			"RELAY_SCHEMA_SUBJECT": "orders-value", "RELAY_SCHEMA_ACCEPT": "1"}, true, "RELAY_RULES_FILE: "},
		{"OTLP protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"}, true, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"trace sampler", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_SAMPLER": "sometimes"}, true, "OTEL_TRACES_SAMPLER"},
		{"metrics port taken", map[string]string{"RELAY_HTTP_ADDR": taken.Addr().String()}, false, "cannot serve metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs, err := runOnce(t, tc.vars)
			var ce *ConfigError
			if err == nil || errors.As(err, &ce) != tc.config {
				t.Fatalf("error %v (%T), want a configuration error: %v", err, err, tc.config)
			}
			if got := err.Error(); tc.config && !strings.Contains(got, tc.want) {
				t.Fatalf("%q does not name %s", got, tc.want)
			}
			if !tc.config && !strings.Contains(logs, tc.want) {
				t.Fatalf("not logged %q:\n%s", tc.want, logs)
			}
		})
	}
}

func TestRunNeedsAbandon(t *testing.T) {
	var ce *ConfigError
	if err := Run(context.Background(), &config.Config{}, Options{}, slog.New(slog.DiscardHandler)); err == nil || errors.As(err, &ce) {
		t.Fatalf("%v; want a runtime failure", err)
	}
}

// A graceful stop is abandoned past its bound, not before, and not when
// it ends in time.
func TestWatchSignalsAbandonsPastTheBound(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	stopped, stop := context.WithCancel(context.Background())
	stop()
	abandoned := make(chan struct{})
	go watchSignals(stopped, stop, nil, 20*time.Millisecond, log, make(chan struct{}), func() { close(abandoned) }, nil)
	select {
	case <-abandoned:
	case <-time.After(5 * time.Second):
		t.Fatal("not abandoned past the bound")
	}
	if !strings.Contains(logs.String(), "graceful stop exceeded its bound; exiting") || !strings.Contains(logs.String(), "RELAY_SHUTDOWN_TIMEOUT") {
		t.Fatalf("log:\n%s", logs.String())
	}

	done := make(chan struct{})
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		watchSignals(stopped, stop, nil, time.Hour, log, done, func() { t.Error("abandoned a stop that ended") }, nil)
	}()
	close(done)
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch outlives the stop")
	}
}

// SIGTERM stops relay gracefully, SIGHUP never does (before or during the
// stop), and a second SIGTERM abandons the stop, also when both were
// queued before the watch read the first.
func TestWatchSignals(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sigs := make(chan os.Signal)
	abandoned := make(chan struct{})
	go watchSignals(ctx, stop, sigs, time.Hour, log, make(chan struct{}), func() { close(abandoned) }, nil)
	sigs <- syscall.SIGHUP
	sigs <- syscall.SIGHUP // received: the first did not end the watch
	if ctx.Err() != nil {
		t.Fatal("SIGHUP stopped relay")
	}
	sigs <- syscall.SIGTERM
	<-ctx.Done()
	sigs <- syscall.SIGHUP
	sigs <- syscall.SIGHUP // received: the watch still runs
	select {
	case <-abandoned:
		t.Fatal("SIGHUP abandoned the graceful stop")
	default:
	}
	sigs <- syscall.SIGTERM
	select {
	case <-abandoned:
	case <-time.After(5 * time.Second):
		t.Fatal("a second SIGTERM did not abandon the stop")
	}
	for _, want := range []string{"SIGHUP ignored", "stopping gracefully", "second signal; exiting at once"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log has no %q:\n%s", want, logs.String())
		}
	}

	// Both signals queued (a quick double Ctrl-C): the second abandons,
	// whichever the watch sees first of it and the cancelled context.
	for range 100 {
		ctx, stop := context.WithCancel(context.Background())
		queued := make(chan os.Signal, 2)
		queued <- syscall.SIGTERM
		queued <- syscall.SIGTERM
		abandoned := make(chan struct{})
		go watchSignals(ctx, stop, queued, time.Hour, log, make(chan struct{}), func() { close(abandoned) }, nil)
		select {
		case <-abandoned:
		case <-time.After(5 * time.Second):
			t.Fatal("two queued SIGTERMs did not abandon the stop")
		}
		stop()
	}
}

// Regression: once the stop began, the watch selected on the cancelled
// context in a loop and spun a core through the whole graceful stop, the
// time relay needs its CPU for the last commit.
func TestWatchSignalsWaitsWithoutSpinning(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	stop()
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		watchSignals(ctx, stop, nil, time.Hour, slog.New(slog.DiscardHandler), done, func() {}, nil)
	}()
	before := cpuNow(t)
	time.Sleep(300 * time.Millisecond)
	spent := cpuNow(t) - before
	close(done)
	<-ended
	if spent > 150*time.Millisecond {
		t.Fatalf("the watch used %s of CPU in 300 ms of a graceful stop; it must wait, not spin", spent)
	}
}

// cpuNow is this process's user and system CPU time.
func cpuNow(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Issue: a process that logged "relay stopped on a fatal error" could go
// on running: only a signal started the shutdown's bound, and a fatal
// stop has none. A failed loop starts it too, so a teardown that does
// not return is abandoned (exit 1) within RELAY_SHUTDOWN_TIMEOUT; a
// graceful end starts nothing.
func TestFatalStopBoundsTheTeardown(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	d := &daemon{log: slog.New(slog.DiscardHandler), stop: stop}
	abandoned := make(chan struct{})
	teardown := make(chan struct{}) // never closed: a close that hangs
	go watchSignals(ctx, stop, nil, 20*time.Millisecond, d.log, teardown, func() { close(abandoned) }, nil)
	if err := d.ended(nil); err != nil || ctx.Err() != nil {
		t.Fatalf("a graceful end: ended = %v, context %v; want neither", err, ctx.Err())
	}
	fatal := fmt.Errorf("%w: commit: fenced", txn.ErrFatal)
	if err := d.ended(fatal); !errors.Is(err, txn.ErrFatal) {
		t.Fatalf("ended = %v", err)
	}
	select {
	case <-abandoned:
	case <-time.After(5 * time.Second):
		t.Fatal("a fatal stop whose teardown hangs was not abandoned past the bound")
	}
}
