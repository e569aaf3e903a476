package daemon

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"relay/internal/config"
)

// watchShutdown bounds a graceful stop: after the first signal (ctx ends)
// the daemon has bound to finish; a second signal, or the bound, abandons
// the stop at once (abandon ends the process with exit 1). Giving up here
// is safe for the contract: nothing uncommitted is ever acknowledged, so
// an open transaction is simply aborted by the broker.
func watchShutdown(ctx context.Context, bound time.Duration, log *slog.Logger, done <-chan struct{}, abandon func()) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	again := make(chan os.Signal, 1)
	// Never stopped: a second signal during the rest of the teardown (the
	// last metrics export) must not end the process with the signal's
	// default status, which is none of relay's exit codes.
	signal.Notify(again, syscall.SIGINT, syscall.SIGTERM)
	t := time.NewTimer(bound)
	select {
	case <-done:
		t.Stop()
	case s := <-again:
		log.Warn("second signal; exiting at once", "signal", s.String())
		abandon()
	case <-t.C:
		log.Error("graceful stop exceeded its bound; exiting", "bound", bound.String(), "var", config.EnvShutdownTimeout)
		abandon()
	}
}
