package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaclient"
	"relay/internal/ledger"
	"relay/internal/rules"
	"relay/internal/schema"
	"relay/internal/telemetry"
	"relay/internal/txn"
)

// runDaemon is `relay run`.
func runDaemon(ctx context.Context, lookup func(string) (string, bool), environ []string, stderr io.Writer) int {
	cfg, ok := loadConfig(lookup, environ, stderr)
	if !ok {
		return exitUsage
	}
	log := newLogger(cfg, stderr)
	for _, name := range config.Unknown(environ) {
		log.Warn("ignoring unknown relay variable (typo?)", "var", name)
	}

	if err := kafkaclient.Validate(cfg); err != nil {
		return clientConfigError(cfg, "", err, stderr)
	}
	ruleSet, err := loadRules(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "relay: invalid configuration:\n  %s: %v\n", config.EnvRulesFile, err)
		return exitUsage
	}
	// librdkafka's own log lines go through slog too, so relay's stderr is
	// one structured stream. The channel is closed (deferred first, so run
	// last) only after every client that writes to it has been closed.
	logs := make(chan kafka.LogEvent, 1024)
	logsDone := make(chan struct{})
	goGuarded(func() { defer close(logsDone); kafkaclient.ForwardLogs(logs, log) })
	defer func() { close(logs); <-logsDone }()

	// Metrics and the endpoint come before the consumer: a taken port
	// then stops relay with nothing to clean up.
	metrics, err := telemetry.New(environ)
	if err != nil {
		fmt.Fprintf(stderr, "relay: invalid configuration:\n  %v\n", err)
		return exitUsage
	}
	defer func() {
		// A last export to an OTLP collector, bounded: a collector that
		// is away must not hold the exit.
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = metrics.Close(c)
	}()
	if cfg.HTTPAddr != "" {
		srv, err := telemetry.Listen(ctx, cfg.HTTPAddr, metrics)
		if err != nil {
			log.Error("cannot serve metrics; set "+config.EnvHTTPAddr+" to a free address, or empty to disable", "err", err)
			return exitFailure
		}
		defer func() {
			c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Close(c)
		}()
	}

	consumer, err := kafkaclient.LoopConsumer(cfg, kafkaclient.WithLogs(logs))
	if err != nil {
		return clientConfigError(cfg, "consumer", err, stderr)
	}
	newProducer := func() (txn.Producer, error) { return kafkaclient.LoopProducer(cfg, kafkaclient.WithLogs(logs)) }

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stopped := make(chan struct{})
	defer close(stopped)
	goGuarded(func() { watchShutdown(ctx, cfg.ShutdownTimeout, log, stopped) })

	retention, retired, err := startChecks(ctx, consumer, cfg, log)
	if err != nil {
		_ = consumer.Close()
		if ctx.Err() != nil {
			return exitOK
		}
		log.Error("preflight failed; relay does not start", "err", err)
		return exitFailure
	}
	var adm *schema.Admitter
	if cfg.SchemaRegistryURL != "" {
		if adm, err = newAdmitter(ctx, cfg, log); err != nil {
			_ = consumer.Close()
			if ctx.Err() != nil {
				return exitOK
			}
			log.Error("schema admission cannot start; relay does not start", "err", err)
			return exitFailure
		}
	}
	watch, err := newLedgerWatch(cfg, log)
	if err != nil {
		_ = consumer.Close()
		log.Error("cannot create the ledger reader; relay does not start", "err", err)
		return exitFailure
	}
	defer watch.close() // after the loop and the watch have stopped: the machine asks it
	machine, err := newMachine(cfg, retired, adm, ruleSet, metrics, watch.discards, log)
	if err != nil {
		_ = consumer.Close()
		log.Error("cannot build the failure state machine; relay does not start", "err", err)
		return exitFailure
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	goGuarded(func() { defer close(watchDone); watch.run(watchCtx) })
	defer func() { stopWatch(); <-watchDone }()
	metrics.SetQuarantine(func() ledger.Summary { return watch.index.Summary(retentionOf(retention)) })

	loop := txn.New(txn.Settings{
		Topics:          machine.Topics(),
		CommitInterval:  cfg.CommitInterval,
		MaxRecords:      cfg.MaxRecordsPerTxn,
		OpTimeout:       cfg.OpTimeout,
		ShutdownTimeout: cfg.ShutdownTimeout,
		TxnTimeout:      cfg.TransactionTimeout,
	}, consumer, newProducer, watchedMachine{machine, watch}, log, metrics)

	log.Info("relay starting", "sources", cfg.SourceTopics, "group", cfg.GroupID, "transactional_id", cfg.TransactionalID,
		"schema_checked", adm != nil, "rules", ruleCount(ruleSet), "hook", cfg.HookURL != "", "retry", describeBudget(cfg))
	if err := loop.Run(ctx); err != nil {
		if errors.Is(err, txn.ErrFatal) {
			log.Error("relay stopped on a fatal error; nothing past the committed offsets was lost", "err", err,
				"hint", "a fenced producer means another instance runs with the same "+config.EnvTransactionalID)
		} else {
			log.Error("relay stopped", "err", err)
		}
		return exitFailure
	}
	log.Info("relay stopped gracefully")
	return exitOK
}

// watchShutdown bounds a graceful stop: after the first signal the process
// has ShutdownTimeout to finish; a second signal, or the bound, exits at once.
// Exiting here is safe for the contract: nothing uncommitted is ever
// acknowledged, so an open transaction is simply aborted by the broker.
func watchShutdown(ctx context.Context, bound time.Duration, log *slog.Logger, done <-chan struct{}) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	again := make(chan os.Signal, 1)
	// Not stopped: the process ends either way once it is notified.
	signal.Notify(again, syscall.SIGINT, syscall.SIGTERM)
	t := time.NewTimer(bound)
	select {
	case <-done:
		t.Stop()
	case s := <-again:
		log.Warn("second signal; exiting at once", "signal", s.String())
		os.Exit(exitFailure)
	case <-t.C:
		log.Error("graceful stop exceeded its bound; exiting", "bound", bound.String(), "var", config.EnvShutdownTimeout)
		os.Exit(exitFailure)
	}
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// clientConfigError reports librdkafka's rejection of a property as a
// configuration error naming the variable.
func clientConfigError(cfg *config.Config, client string, err error, stderr io.Writer) int {
	var ce *kafkaclient.ConfigError
	if !errors.As(err, &ce) {
		ce = kafkaclient.AsConfigError(cfg, client, err)
	}
	fmt.Fprintf(stderr, "relay: invalid configuration:\n  %v\n", ce)
	return exitUsage
}

func ruleCount(s *rules.Set) int {
	if s == nil {
		return 0
	}
	return s.Len()
}
