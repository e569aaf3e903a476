// Package daemon is `relay run`: it checks what must hold before relay
// consumes (the topics, the broker's transaction limit, retired tiers, the
// registry), assembles the failure state machine, and runs the
// transactional loop with the ledger watch beside it until a signal stops
// it or it fails. It never exits the process: Run returns how it ended,
// and the caller (cmd/relay) turns that into an exit code and provides
// the exits a graceful stop may need (Options).
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/checks"
	"relay/internal/config"
	"relay/internal/features"
	"relay/internal/kafkaclient"
	"relay/internal/kafkaerr"
	"relay/internal/ledger"
	"relay/internal/ledgerwatch"
	"relay/internal/pipeline"
	"relay/internal/rules"
	"relay/internal/schema"
	"relay/internal/secret"
	"relay/internal/telemetry"
	"relay/internal/tracing"
	"relay/internal/txn"
)

// Options is what Run needs from the process around it.
type Options struct {
	// Environ is the process environment: OTEL_* variables configure the
	// metrics export, and RELAY_* names relay does not know are warned
	// about.
	Environ []string
	// Go runs f on a goroutine of its own; a panic there must end the
	// process as a runtime failure (exit 1). Nil runs f with a plain go
	// statement.
	Go func(f func())
	// Abandon ends the process at once as a runtime failure (exit 1), and
	// does not return. Run calls it when it gives a graceful stop up: on a
	// second SIGINT or SIGTERM, or past RELAY_SHUTDOWN_TIMEOUT after the
	// first. Required.
	Abandon func()
	// Signals delivers the signals relay acts on (SIGINT, SIGTERM, SIGHUP)
	// when they reach it through its supervisor (cmd/relay). Nil: Run
	// subscribes to the process's own.
	Signals <-chan os.Signal
}

// ConfigError is a configuration relay refuses before it has started
// anything (exit 2): a property librdkafka rejects, a rules file that does
// not load, a bad OTEL_* variable. Its message names what is wrong.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ClientConfigError is librdkafka's rejection of a property of client
// ("consumer", "producer", "admin"; "" for any), as a *ConfigError naming
// the variable.
func ClientConfigError(cfg *config.Config, client string, err error) error {
	var ce *kafkaclient.ConfigError
	if !errors.As(err, &ce) {
		ce = kafkaclient.AsConfigError(cfg, client, err)
	}
	return &ConfigError{Err: ce}
}

// errStopped is a stop by a signal before the loop started: graceful.
var errStopped = errors.New("stopped before consuming")

// Run runs the daemon until a SIGINT or SIGTERM (or the end of ctx) stops
// it gracefully, and returns nil then, also when the stop came during the
// preflight. A *ConfigError means nothing was started. Any other error is
// a runtime failure, which Run has logged before returning it.
func Run(ctx context.Context, cfg *config.Config, opts Options, log *slog.Logger) error {
	if opts.Abandon == nil {
		err := errors.New("daemon: Options.Abandon is required")
		log.Error("relay does not start", "err", err)
		return err
	}
	if opts.Go == nil {
		opts.Go = func(f func()) { go f() }
	}
	sigs := opts.Signals
	if sigs == nil {
		sigs = processSignals()
	}
	for _, name := range config.Unknown(opts.Environ) {
		log.Warn("ignoring unknown relay variable (typo?)", "var", name)
	}
	for _, u := range cfg.InsecureCredentialURLs() { // only with RELAY_ALLOW_INSECURE_HTTP=true
		log.Warn("credentials go over plain http:// ("+config.EnvAllowInsecureHTTP+"=true): anyone on the way reads them", "var", u.Var, "sends", u.What)
	}
	d := &daemon{cfg: cfg, opts: opts, log: log}
	ruleSet, err := d.checkConfig()
	if err != nil {
		return err
	}
	if d.traces, err = tracing.New(ctx, opts.Environ, cfg.TransactionalID); err != nil {
		return &ConfigError{Err: err}
	}
	tracing.LogErrors(log)
	defer d.flushTraces() // when the start failed; a second time does nothing
	defer d.forwardLogs()()
	metrics, closeMetrics, err := d.serveMetrics(ctx)
	if err != nil {
		return err
	}
	defer closeMetrics()
	metrics.SetSpansDropped(d.traces.Dropped)

	consumer, err := kafkaclient.LoopConsumer(cfg, kafkaclient.WithLogs(d.logs))
	if err != nil {
		return ClientConfigError(cfg, "consumer", err)
	}
	d.lag = &lagReader{c: consumer}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	d.stop = stop
	stopAfter := context.AfterFunc(ctx, func() { d.signalled.Store(time.Now().UnixNano()) })
	defer stopAfter()
	stopped := make(chan struct{})
	defer close(stopped)
	defer d.flushTraces() // within the bound watchSignals keeps
	var reload chan struct{}
	if secrets := cfg.FileSecrets(); len(secrets) > 0 {
		reload = make(chan struct{}, 1)
		opts.Go(func() {
			secret.Watch(ctx, secrets, secret.WatchInterval, reload, d.secretChanged, log)
		})
	}
	opts.Go(func() { watchSignals(ctx, stop, sigs, cfg.ShutdownTimeout, log, stopped, opts.Abandon, reload) })

	err = d.consume(ctx, consumer, ruleSet, metrics)
	if errors.Is(err, errStopped) {
		return nil
	}
	return err
}

// daemon is one run's configuration and what its phases share.
type daemon struct {
	cfg  *config.Config
	opts Options
	log  *slog.Logger
	logs chan kafka.LogEvent // librdkafka's log lines, for every client
	// signalled is when a signal asked relay to stop (unix nanoseconds; 0
	// before): the span flush fits in what the shutdown bound has left.
	signalled atomic.Int64
	// clientsLeft is set when the loop returned with a librdkafka client
	// still running (see txn.Loop.ClientsLeft).
	clientsLeft atomic.Bool
	// traces is the tracer provider; without tracing it makes no span.
	traces *tracing.Provider
	// lag guards the consumer: the lag scrape and a rotated SASL secret
	// reach it only while it is open (closeConsumer).
	lag *lagReader
	// producer is the loop's latest transactional producer, which a
	// rotated SASL secret is given to.
	producer atomic.Pointer[guardedProducer]
	// stop cancels Run's context: after a signal, or once the loop has
	// failed, and then the rest of the teardown has RELAY_SHUTDOWN_TIMEOUT
	// (see watchSignals).
	stop context.CancelFunc
	// group watches what the group's members announce (see features).
	group *features.Watch
}

// checkConfig checks what only librdkafka and the rules file can tell,
// before anything connects.
func (d *daemon) checkConfig() (*rules.Set, error) {
	if err := kafkaclient.Validate(d.cfg); err != nil {
		return nil, ClientConfigError(d.cfg, "", err)
	}
	ruleSet, err := checks.Rules(d.cfg)
	if err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("%s: %w", config.EnvRulesFile, err)}
	}
	return ruleSet, nil
}

// consume checks the topics, starts the ledger watch, assembles the
// machine and runs the loop until ctx ends or the loop fails.
func (d *daemon) consume(ctx context.Context, consumer *kafka.Consumer, ruleSet *rules.Set, metrics *telemetry.Metrics) error {
	ready, err := d.prepare(ctx, consumer, metrics)
	if err != nil {
		return err
	}
	watch, err := ledgerwatch.New(d.cfg, d.log)
	if err != nil {
		d.closeConsumer(consumer)
		d.log.Error("cannot create the ledger reader; relay does not start", "err", err)
		return fmt.Errorf("ledger reader: %w", err)
	}
	defer watch.Close()       // after the loop and the watch have stopped: the machine asks it
	members := d.newMembers() // closed by the watch, or here on a refusal
	if err := d.checkGroupSettings(ctx, members); err != nil {
		members.close()
		return d.notStarted(ctx, consumer, "the group's members run other settings; relay does not join", err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	// Every instance announces itself (its shared settings, and under
	// key ordering its features); key ordering parks by the group's
	// agreement.
	var featuresDone <-chan struct{}
	d.group, featuresDone = d.watchFeatures(watchCtx, metrics, members)
	machine, err := newMachine(d.cfg, ready.retired, ready.adm, ruleSet, metrics, watch.Discards(), d.traces, metrics.Alive, d.log,
		metrics.Access(telemetry.DependencyHook, hookCredentialVars, d.log), metrics, d.group)
	if err != nil {
		stopWatch()
		d.closeConsumer(consumer)
		d.log.Error("cannot build the failure state machine; relay does not start", "err", err)
		return fmt.Errorf("failure state machine: %w", err)
	}
	machine.SetLogStart(d.lag.logStart)
	watchDone := make(chan struct{})
	d.opts.Go(func() { defer close(watchDone); watch.Run(watchCtx) })
	defer func() {
		stopWatch()
		<-watchDone
		// The farewell member record, bounded by its own timeout.
		select {
		case <-featuresDone:
		case <-time.After(farewellTimeout + time.Second):
		}
	}()
	metrics.SetQuarantine(func() ledger.Summary { return watch.Summary(ready.retention) })
	metrics.SetOwners(owners(d.cfg))
	if ready.adm != nil {
		d.opts.Go(func() { probeRefusedRegistry(watchCtx, ready.adm, metrics, d.cfg.SchemaTimeout) })
	}
	return d.loop(ctx, consumer, watchedMachine{machine, watch}, ruleSet, metrics)
}

// closeConsumer closes the loop's consumer once no scrape or secret
// rotation can reach it any more.
func (d *daemon) closeConsumer(c *kafka.Consumer) { _ = lagConsumer{c, d.lag}.Close() }

// prepared is what holds once the start-up checks passed.
type prepared struct {
	retention map[string]time.Duration
	retired   map[string][]pipeline.RetiredTier
	adm       *schema.Admitter // nil without a registry
}

// prepare runs what must hold before relay consumes. It closes the
// consumer when it fails; a failure that a signal caused is errStopped.
func (d *daemon) prepare(ctx context.Context, consumer *kafka.Consumer, metrics *telemetry.Metrics) (prepared, error) {
	var p prepared
	var err error
	p.retention, p.retired, err = startChecks(ctx, consumer, d.cfg, d.log)
	if err != nil {
		return p, d.notStarted(ctx, consumer, "preflight failed; relay does not start", err)
	}
	if d.cfg.SchemaRegistryURL != "" {
		access := metrics.Access(telemetry.DependencyRegistry, registryCredentialVars, d.log)
		if p.adm, err = checks.Admitter(ctx, d.cfg, d.log, access); err != nil {
			var un *schema.UnauthorizedError
			var tlsErr *schema.TLSError
			switch {
			case errors.As(err, &un) && d.cfg.SchemaRegistryOAuth != nil:
				err = &ConfigError{Err: fmt.Errorf("%s, %s, %s: %w", config.EnvRegistryTokenURL, config.EnvRegistryClientID,
					d.cfg.SchemaRegistryOAuth.Secret.VarName(config.EnvRegistryClientSecret), err)}
			case errors.As(err, &un):
				err = &ConfigError{Err: fmt.Errorf("%s, %s: %w", config.EnvSchemaRegistryUser, d.cfg.SchemaRegistrySecret.VarName(config.EnvSchemaRegistrySecret), err)}
			case errors.As(err, &tlsErr):
				err = &ConfigError{Err: fmt.Errorf("%s, %s, %s: %w", config.EnvSchemaRegistryCA, config.EnvSchemaRegistryCert, config.EnvSchemaRegistryKey, err)}
			}
			return p, d.notStarted(ctx, consumer, "schema admission cannot start; relay does not start", err)
		}
	}
	return p, nil
}

// notStarted closes the consumer of a daemon that stops before consuming,
// and logs why, unless a signal stopped it.
func (d *daemon) notStarted(ctx context.Context, consumer *kafka.Consumer, msg string, err error) error {
	d.closeConsumer(consumer)
	if ctx.Err() != nil {
		return errStopped
	}
	d.log.Error(msg, "err", err)
	return err
}

// loop runs the transactional loop until ctx ends or it fails.
func (d *daemon) loop(ctx context.Context, consumer *kafka.Consumer, machine watchedMachine, ruleSet *rules.Set, metrics *telemetry.Metrics) error {
	cfg := d.cfg
	newProducer := func() (txn.Producer, error) {
		p, err := kafkaclient.LoopProducer(cfg, kafkaclient.WithLogs(d.logs))
		if err != nil {
			return nil, err
		}
		g := &guardedProducer{Producer: p}
		d.producer.Store(g)
		return g, nil
	}
	lag := d.lag
	metrics.SetLag(lag.lag)
	metrics.SetParked(func() telemetry.Parked {
		s := machine.ParkStats()
		p := telemetry.Parked{Records: s.Records, Bytes: s.Bytes, Refused: s.Refused, Lost: s.Lost}
		for part, n := range s.Behind {
			p.Behind = append(p.Behind, telemetry.Lag{Topic: part.Topic, Partition: part.Partition, Records: n})
		}
		return p
	})
	metrics.SetLivenessBound(livenessBound(cfg))
	settings := txn.Settings{
		Topics:          machine.Topics(),
		CommitInterval:  cfg.CommitInterval,
		MaxRecords:      cfg.MaxRecordsPerTxn,
		OpTimeout:       cfg.OpTimeout,
		ShutdownTimeout: cfg.ShutdownTimeout,
		TxnTimeout:      cfg.TransactionTimeout,
		SessionTimeout:  cfg.SessionTimeout,
		MaxPollInterval: cfg.MaxPollInterval,
		StaticMember:    cfg.GroupInstanceID != "",
		WedgeAfter:      txn.WedgeAfter(cfg.OpTimeout),
		Tracer:          d.traces.Tracer("relay/internal/txn"),
	}
	d.log.Info("relay starting", "sources", cfg.SourceTopics, "group", cfg.GroupID, "transactional_id", cfg.TransactionalID,
		"schema_checked", cfg.SchemaRegistryURL != "", "rules", RuleCount(ruleSet), "hook", cfg.HookURL != "", "retry", describeBudget(cfg))
	var rejoins []time.Time
	for {
		err := d.runLoop(ctx, txn.New(settings, lagConsumer{consumer, lag}, newProducer, machine, d.log, pokeOnAssign{metrics, d.group}))
		if errors.Is(err, txn.ErrInstanceFenced) {
			consumer, err = d.rejoin(ctx, err, &rejoins)
			if err == nil && consumer != nil {
				continue
			}
		}
		return d.ended(err)
	}
}

// runLoop runs one loop until it returns. A loop that leaves a client
// behind (see txn.Loop.ClientsLeft) leaves it for the rest of the
// process, also when Run panics: the log channel must then stay open.
func (d *daemon) runLoop(ctx context.Context, loop *txn.Loop) error {
	defer func() {
		if loop.ClientsLeft() {
			d.clientsLeft.Store(true)
		}
	}()
	return loop.Run(ctx)
}

// ended logs how the loop ended and returns its error. A failed loop
// starts the shutdown's bound on the rest of the teardown, as a signal
// does: a process that said it stopped must not go on holding its
// transactional.id and group.instance.id for as long as a close that does
// not return (the ledger reader's, the last exports) lasts.
func (d *daemon) ended(err error) error {
	if err != nil {
		if d.stop != nil {
			d.stop()
		}
		switch {
		case errors.Is(err, txn.ErrFatal):
			attrs := []any{"err", err}
			if kafkaerr.Fenced(err) {
				attrs = append(attrs, "hint", "a fenced producer means another instance runs with the same "+config.EnvTransactionalID)
			}
			d.log.Error("relay stopped on a fatal error; nothing past the committed offsets was lost", attrs...)
		default:
			d.log.Error("relay stopped", "err", err)
		}
		return err
	}
	d.log.Info("relay stopped gracefully")
	return nil
}

// watchedMachine is the machine that also tells the ledger watch which
// source partitions this instance owns.
type watchedMachine struct {
	*pipeline.Machine
	watch *ledgerwatch.Watch
}

// OnOwned implements txn.OwnershipListener.
func (m watchedMachine) OnOwned(owned []txn.TopicPartition) { m.watch.Own(m.Table(), owned) }

// livenessBound is how long the loop may go without progress before
// /livez calls it stuck: longer than anything it does without going round
// — handling a record within the transaction (at most the transaction
// timeout), one state restore attempt (reading to an end, at most twice
// the transaction timeout or a minute), and a few transactional calls of
// RELAY_OP_TIMEOUT each, and two calls the watchdog gives up on (see
// txn.WedgeAfter). A broker outage is not stuck: the loop keeps
// reporting progress between its tries, and /readyz says it is not
// consuming.
func livenessBound(cfg *config.Config) time.Duration {
	return 2*max(cfg.TransactionTimeout, 30*time.Second) + 4*cfg.OpTimeout + 2*txn.WedgeAfter(cfg.OpTimeout)
}
