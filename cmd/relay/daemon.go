package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
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

	if code := validateClients(cfg, stderr); code != exitOK {
		return code
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
	goGuarded(func() { forwardClientLogs(logs, log, logsDone) })
	defer func() { close(logs); <-logsDone }()
	withLogs := func(m *kafka.ConfigMap) *kafka.ConfigMap {
		(*m)["go.logs.channel.enable"] = true
		(*m)["go.logs.channel"] = logs
		return m
	}

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

	consumer, err := kafka.NewConsumer(withLogs(consumerConfig(cfg)))
	if err != nil {
		return clientConfigError(cfg, "consumer", err, stderr)
	}
	newProducer := func() (txn.Producer, error) { return kafka.NewProducer(withLogs(producerConfig(cfg))) }

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
	machine := newMachine(cfg, retired, adm, ruleSet, metrics, log)
	watch, err := newLedgerWatch(cfg, log)
	if err != nil {
		_ = consumer.Close()
		log.Error("cannot create the ledger reader; relay does not start", "err", err)
		return exitFailure
	}
	defer watch.close() // after the loop and the watch have stopped: the machine asks it
	machine.Discards = watch.discards
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	goGuarded(func() { defer close(watchDone); watch.run(watchCtx) })
	defer func() { stopWatch(); <-watchDone }()
	metrics.SetQuarantine(func() ledger.Summary { return watch.index.Summary(retentionOf(retention)) })

	loop := txn.New(txn.Settings{
		Topics:          machine.Table.Topics(),
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

// forwardClientLogs writes librdkafka's log events (syslog levels) to log
// until logs is closed.
func forwardClientLogs(logs <-chan kafka.LogEvent, log *slog.Logger, done chan<- struct{}) {
	defer close(done)
	for ev := range logs {
		level := slog.LevelDebug
		switch {
		case ev.Level <= 3:
			level = slog.LevelError
		case ev.Level == 4:
			level = slog.LevelWarn
		case ev.Level <= 6:
			level = slog.LevelInfo
		}
		log.Log(context.Background(), level, ev.Message, "source", "librdkafka", "client", ev.Name, "tag", ev.Tag)
	}
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// Properties that only one client understands; librdkafka warns when the
// other is given them, so they are kept apart.
var consumerOnly = map[string]bool{
	"auto.offset.reset": true, "max.poll.interval.ms": true, "session.timeout.ms": true,
	"heartbeat.interval.ms": true, "partition.assignment.strategy": true, "group.instance.id": true,
	"group.protocol": true, "group.remote.assignor": true, "fetch.min.bytes": true, "fetch.max.bytes": true,
	"fetch.wait.max.ms": true, "max.partition.fetch.bytes": true, "queued.min.messages": true,
	"queued.max.messages.kbytes": true, "auto.commit.interval.ms": true, "check.crcs": true,
}

var producerOnly = map[string]bool{
	"transaction.timeout.ms": true, "linger.ms": true, "queue.buffering.max.ms": true,
	"queue.buffering.max.messages": true, "queue.buffering.max.kbytes": true, "batch.num.messages": true,
	"batch.size": true, "compression.type": true, "compression.codec": true, "compression.level": true,
	"acks": true, "request.required.acks": true, "message.timeout.ms": true, "delivery.timeout.ms": true,
	"partitioner": true, "sticky.partitioning.linger.ms": true, "retries": true, "message.send.max.retries": true,
}

func consumerConfig(cfg *config.Config) *kafka.ConfigMap {
	return clientConfig(cfg, producerOnly, kafka.ConfigMap{
		"group.id":                 cfg.GroupID,
		"enable.auto.commit":       false,
		"enable.auto.offset.store": false,
		// Read only committed records: what an aborted transaction wrote
		// upstream never reaches relay's outputs.
		"isolation.level": "read_committed",
	})
}

func producerConfig(cfg *config.Config) *kafka.ConfigMap {
	return clientConfig(cfg, consumerOnly, kafka.ConfigMap{
		"transactional.id": cfg.TransactionalID,
		// The commit says whether every message of the transaction was
		// written; the reports of failed deliveries say which source
		// partition to hold back (see txn's stalls). The Go client
		// refuses delivery.report.only.error, so every delivery is
		// reported, without its fields, and the loop drops the good ones.
		"go.delivery.reports":       true,
		"go.delivery.report.fields": "none",
	})
}

// clientConfig is the passthrough without the other client's properties,
// with relay's managed properties on top (config rejects them in the
// passthrough, so nothing is overridden silently).
func clientConfig(cfg *config.Config, otherClients map[string]bool, managed kafka.ConfigMap) *kafka.ConfigMap {
	m := kafka.ConfigMap{}
	for k, v := range cfg.Kafka {
		if !otherClients[k] {
			m[k] = v
		}
	}
	for k, v := range managed {
		m[k] = v
	}
	return &m
}

// validateClients lets librdkafka check every passthrough property before
// anything connects: the clients are built without bootstrap servers, so
// they cannot reach a broker, and closed again at once.
func validateClients(cfg *config.Config, stderr io.Writer) int {
	offline := func(m *kafka.ConfigMap) *kafka.ConfigMap {
		c := kafka.ConfigMap{}
		for k, v := range *m {
			if k != "bootstrap.servers" {
				c[k] = v
			}
		}
		return &c
	}
	c, err := kafka.NewConsumer(offline(consumerConfig(cfg)))
	if err != nil {
		return clientConfigError(cfg, "consumer", err, stderr)
	}
	_ = c.Close()
	p, err := kafka.NewProducer(offline(producerConfig(cfg)))
	if err != nil {
		return clientConfigError(cfg, "producer", err, stderr)
	}
	p.Close()
	return exitOK
}

var propInMessage = regexp.MustCompile(`property:? "([^"]+)"`)

// clientConfigError turns librdkafka's rejection of a property into a
// configuration error naming the variable.
func clientConfigError(cfg *config.Config, client string, err error, stderr io.Writer) int {
	name := "RELAY_KAFKA_*"
	if m := propInMessage.FindStringSubmatch(err.Error()); m != nil {
		name = cfg.VarForProperty(m[1])
	}
	fmt.Fprintf(stderr, "relay: invalid configuration:\n  %s: rejected by librdkafka (%s): %v\n", name, client, err)
	return exitUsage
}

func ruleCount(s *rules.Set) int {
	if s == nil {
		return 0
	}
	return s.Len()
}
