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

// processSignals subscribes to the signals relay acts on: SIGINT and
// SIGTERM stop it, SIGHUP is acknowledged. The subscription is never
// stopped: a signal during the rest of the teardown (the last metrics
// export) must not end the process with the signal's default status,
// which is none of relay's exit codes.
func processSignals() <-chan os.Signal {
	c := make(chan os.Signal, 4)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	return c
}

// watchSignals turns signals into a graceful stop and bounds it: the first
// SIGINT or SIGTERM calls stop; after it (or after ctx ends otherwise) the
// daemon has bound to finish (done closes); a second SIGINT or SIGTERM, or
// the bound, abandons the stop at once (abandon ends the process with exit
// 1). Giving up here is safe for the contract: nothing uncommitted is ever
// acknowledged, so an open transaction is simply aborted by the broker.
//
// SIGHUP never stops relay: it is the signal supervisors and terminals
// send for "reload" or "your terminal went away". relay re-reads its
// secret files on it (reload; nil when there is none): the rest of its
// configuration is fixed for the life of the process.
func watchSignals(ctx context.Context, stop context.CancelFunc, sigs <-chan os.Signal, bound time.Duration, log *slog.Logger, done <-chan struct{}, abandon func(),
	reload chan<- struct{}) {
	ctxDone := ctx.Done()
	var deadline <-chan time.Time
	stopping := func() {
		ctxDone = nil // seen: a closed channel in the select would spin
		t := time.NewTimer(bound)
		deadline = t.C
	}
	for {
		select {
		case <-done:
			return
		case <-ctxDone:
			stopping()
		case s := <-sigs:
			switch {
			case s == syscall.SIGHUP && reload != nil:
				log.Info("SIGHUP: reading the secret files again; the rest of relay's configuration is fixed for the life of the process", "signal", s.String())
				select {
				case reload <- struct{}{}:
				default: // a reload is under way
				}
			case s == syscall.SIGHUP:
				log.Info("SIGHUP ignored: relay's configuration is fixed for the life of the process; restart it to change it", "signal", s.String())
			case deadline != nil:
				log.Warn("second signal; exiting at once", "signal", s.String())
				abandon()
				return
			default:
				log.Info("stopping gracefully", "signal", s.String(), "bound", bound.String())
				stop()
				stopping() // a second signal already queued abandons
			}
		case <-deadline:
			log.Error("graceful stop exceeded its bound; exiting without the rest of the teardown", "bound", bound.String(), "var", config.EnvShutdownTimeout)
			abandon()
			return
		}
	}
}
