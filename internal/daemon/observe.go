// What the daemon shows of itself: its logs (librdkafka's among them),
// its metrics endpoint and its traces.

package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaclient"
	"relay/internal/telemetry"
)

// flushTraces exports the spans still queued and stops the exporter,
// within the shutdown bound and at most 5 s: a collector that is away
// must not hold the exit, and what is not out by then is dropped.
func (d *daemon) flushTraces() {
	budget := min(5*time.Second, d.cfg.ShutdownTimeout)
	if at := d.signalled.Load(); at != 0 {
		// What the shutdown bound has left, with a margin for the rest of
		// the teardown: the flush must not turn a graceful stop into an
		// abandoned one.
		budget = min(budget, d.cfg.ShutdownTimeout-time.Since(time.Unix(0, at))-time.Second)
	}
	if budget <= 0 {
		budget = time.Millisecond // drop what is queued; nothing waits
	}
	c, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	if err := d.traces.Shutdown(c); err != nil {
		d.log.Warn("spans not exported at shutdown", "err", err)
	}
	d.traces = nil
}

// forwardLogs sends librdkafka's own log lines through slog too, so
// relay's stderr is one structured stream. It returns the function that
// closes the channel, to be called only after every client that writes to
// it has been closed.
func (d *daemon) forwardLogs() (closeLogs func()) {
	d.logs = make(chan kafka.LogEvent, 1024)
	done := make(chan struct{})
	d.opts.Go(func() { defer close(done); kafkaclient.ForwardLogs(d.logs, d.log) })
	return func() {
		if d.clientsLeft.Load() {
			// A client the loop gave up on (a librdkafka call that never
			// returned) may still log: a send on a closed channel would
			// crash the exit. The process ends without it.
			return
		}
		close(d.logs)
		<-done
	}
}

// serveMetrics sets the metrics up and serves the endpoint. It comes
// before the consumer: a taken port then stops relay with nothing to clean
// up. closeAll stops the endpoint and makes a last, bounded, export.
func (d *daemon) serveMetrics(ctx context.Context) (m *telemetry.Metrics, closeAll func(), err error) {
	m, err = telemetry.New(d.opts.Environ)
	if err != nil {
		return nil, nil, &ConfigError{Err: err}
	}
	m.SetConsumerGroup(d.cfg.GroupID)
	closeMetrics := func() {
		// A collector that is away must not hold the exit.
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Close(c)
	}
	if d.cfg.HTTPAddr == "" {
		return m, closeMetrics, nil
	}
	srv, err := telemetry.Listen(ctx, d.cfg.HTTPAddr, m)
	if err != nil {
		d.log.Error("cannot serve metrics; set "+config.EnvHTTPAddr+" to a free address, or empty to disable", "err", err)
		closeMetrics()
		return nil, nil, fmt.Errorf("metrics endpoint: %w", err)
	}
	return m, func() {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Close(c)
		closeMetrics()
	}, nil
}

// NewLogger is relay's logger: RELAY_LOG_FORMAT (json or text) at
// RELAY_LOG_LEVEL, to w.
func NewLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// owners names each quarantine topic's owner and alert threshold for the
// gauges that carry them.
func owners(cfg *config.Config) []telemetry.Ownership {
	out := make([]telemetry.Ownership, 0, len(cfg.SourceTopics))
	for _, src := range cfg.SourceTopics {
		out = append(out, telemetry.Ownership{Topic: cfg.Derived(src).Quarantine, Owner: cfg.Owner(src), Threshold: cfg.Threshold(src)})
	}
	return out
}
