// Command relay-bench measures relay against a non-transactional passthrough
// on the same machine and broker, in one run: throughput of a preloaded
// backlog, end-to-end latency at a fixed rate, and relay's peak RSS and
// transaction counters. See docs/PERFORMANCE.md.
//
// It asserts nothing about timing: it exits non-zero only when something
// fails (a client error, relay exiting, records not arriving in time).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

type options struct {
	bootstrap  string
	records    int
	size       int
	partitions int
	rf         int // replication factor of the topics the run creates
	relayBin   string
	latRate    int
	latSeconds int
	relayEnv   string
	registry   string
	admission  bool
	keyModes   bool
	keyHops    int
	hopsRate   int
	otlp       string
	timeout    time.Duration
	keepTopics bool
	streams    string // (k): the built Kafka Streams passthrough; empty skips it
	streamsJVM string
	java       string
	blocked    int
	audit      int
	// auditFailures: relay audit of this many quarantined failures in
	// one batch, against as many processed records.
	auditFailures int
	formats       int
	scale         int
	relayLogs     string
	console       int
	hookDelays    []time.Duration // (e) and (f) once per delay
	hookSerial    bool            // and again at RELAY_HOOK_CONCURRENCY=1
	hookEnv       string          // and again with this env (e.g. the batch protocol)
}

func main() {
	var o options
	flag.StringVar(&o.bootstrap, "bootstrap", "127.0.0.1:9092", "Kafka bootstrap servers")
	flag.IntVar(&o.records, "records", 200000, "records preloaded for the throughput phase")
	flag.IntVar(&o.size, "size", 1024, "value size in bytes")
	flag.IntVar(&o.partitions, "partitions", 3, "partitions of every source and output topic")
	flag.IntVar(&o.rf, "replication-factor", 1, "replication factor of every topic the run creates: 3 on the three-broker cluster (scripts/stack/cluster.sh), whose min.insync.replicas=2 makes every acks=all write wait for a second copy")
	flag.StringVar(&o.relayBin, "relay", "bin/relay", "path to the relay binary")
	flag.IntVar(&o.latRate, "latency-rate", 5000, "records/s produced in the latency phase")
	flag.IntVar(&o.latSeconds, "latency-seconds", 10, "duration of the latency phase in seconds")
	flag.StringVar(&o.relayEnv, "relay-env", "", "extra env for an additional, separately labelled relay run, e.g. RELAY_KAFKA_LINGER_MS=20,RELAY_COMMIT_INTERVAL=500ms (also MALLOC_ARENA_MAX, GOGC, GOMEMLIMIT); with -scale, the env of its instances")
	flag.StringVar(&o.registry, "registry", "http://127.0.0.1:8081/apis/ccompat/v7", "schema registry of the admission modes")
	flag.BoolVar(&o.admission, "admission", true, "also run the admission modes: (d) decode + upcast + rules, (e) the same plus a hook failing 10% of records once")
	flag.BoolVar(&o.keyModes, "key-modes", false, "also run key ordering with a hook: (f) no failures, (g) 5% of keys fail once")
	flag.IntVar(&o.keyHops, "key-hops", 0, "records of the key-hops mode (h): key ordering, 3% of the records failing twice at the hook, 200 keys, fed at -key-hops-rate; it prints tier records per source record. 0 skips it")
	flag.IntVar(&o.hopsRate, "key-hops-rate", 300, "records/s fed in the key-hops mode")
	delays := flag.String("hook-delays", "0", "comma-separated pauses of the bench's hook before each answer: modes (e) and (f) run once per pause, e.g. 1ms,20ms")
	flag.BoolVar(&o.hookSerial, "hook-serial", false, "also run (e) and (f) at RELAY_HOOK_CONCURRENCY=1, one record at a time, for the same-run ratio")
	flag.StringVar(&o.hookEnv, "hook-env", "", "also run (e) and (f) with this extra relay env, e.g. RELAY_HOOK_BATCH=64,RELAY_HOOK_CONCURRENCY=256 (the bench's hook speaks the batch protocol)")
	flag.StringVar(&o.otlp, "otlp", "http://127.0.0.1:4318", "OTLP/HTTP endpoint of the tracing modes (t1, t01: relay with tracing on, parent-based ratio 1.0 and 0.01); empty skips them")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound on each phase of each mode (an overrun is an error)")
	flag.StringVar(&o.streams, "streams", "", "directory of the built Kafka Streams passthrough (scripts/tools/streams-bench.sh path): also run mode (k), Kafka Streams exactly_once_v2, beside relay (b); empty skips it")
	flag.StringVar(&o.streamsJVM, "streams-jvm", "", "extra JVM options of mode (k), space-separated (default: none, the JVM's own heap and GC choice)")
	flag.StringVar(&o.java, "java", "java", "java binary of mode (k)")
	flag.BoolVar(&o.keepTopics, "keep-topics", false, "do not delete the topics and groups this run created")
	flag.IntVar(&o.blocked, "blocked-keys", 0, "instead of the modes: relay's RSS idle and with this many keys blocked at once (key ordering, every key's record in a 1h tier)")
	flag.IntVar(&o.console, "console", 0, "instead of the modes: relay console's memory over a quarantine of this many records relay quarantined, against relay quarantine stats on the same quarantine")
	flag.StringVar(&o.relayLogs, "relay-logs", "", "a directory: each relay the bench starts logs at debug level (each commit) to a file of its own there (relay-*.log, named in the output), to see where a run's time went")
	flag.IntVar(&o.scale, "scale", 0, "instead of the modes: this many relay instances in one group over -partitions partitions (every derived topic with as many): start-up to first commit, RSS per owned partition, commit latency under a steady load, and the stall when one instance is killed")
	flag.IntVar(&o.formats, "formats", 0, "instead of the modes: admission and upcast of the same record in Avro, Protobuf and JSON Schema, in this process, for this many seconds; ratios to Avro")
	flag.IntVar(&o.auditFailures, "audit-failures", 0, "instead of the modes: relay audit's peak RSS with this many quarantined failures in one batch, against as many processed records")
	flag.IntVar(&o.audit, "audit", 0, "instead of the modes: relay audit's scan of this many source records and their outputs, against a plain consumer reading the same topics")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "relay-bench: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	if _, err := parseEnv(o.hookEnv); err != nil {
		fmt.Fprintln(os.Stderr, "relay-bench: -hook-env:", err)
		os.Exit(2)
	}
	if err := o.parseDelays(*delays); err != nil {
		fmt.Fprintln(os.Stderr, "relay-bench:", err)
		os.Exit(2)
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "relay-bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay-bench: FAILED:", err)
		os.Exit(1)
	}
}

// parseDelays reads -hook-delays.
func (o *options) parseDelays(v string) error {
	for _, f := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < 0 || d > 10*time.Second {
			return fmt.Errorf("-hook-delays: %q is not a pause from 0 to 10s", f)
		}
		o.hookDelays = append(o.hookDelays, d)
	}
	return nil
}

func (o *options) validate() error {
	var errs []error
	if o.records <= 0 {
		errs = append(errs, errors.New("-records must be > 0"))
	}
	if o.keyHops < 0 || o.hopsRate <= 0 {
		errs = append(errs, errors.New("-key-hops must be >= 0 and -key-hops-rate > 0"))
	}
	if o.size <= 0 {
		errs = append(errs, errors.New("-size must be > 0"))
	}
	if o.partitions <= 0 {
		errs = append(errs, errors.New("-partitions must be > 0"))
	}
	if o.rf <= 0 {
		errs = append(errs, errors.New("-replication-factor must be > 0"))
	}
	if o.latRate <= 0 || o.latSeconds <= 0 {
		errs = append(errs, errors.New("-latency-rate and -latency-seconds must be > 0"))
	}
	if _, err := os.Stat(o.relayBin); err != nil {
		errs = append(errs, fmt.Errorf("-relay: %w (build it with: go build -o bin/relay ./cmd/relay)", err))
	}
	if _, err := parseEnv(o.relayEnv); err != nil {
		errs = append(errs, err)
	}
	if err := o.checkStreams(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// parseEnv parses "K=V,K=V".
func parseEnv(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "RELAY_") && k != "MALLOC_ARENA_MAX" && k != "GOGC" && k != "GOMEMLIMIT" {
			return nil, fmt.Errorf("-relay-env: %q is not RELAY_NAME=value (or MALLOC_ARENA_MAX, GOGC, GOMEMLIMIT)", kv)
		}
		out = append(out, kv)
	}
	return out, nil
}

func run(ctx context.Context, o options) (err error) {
	b, err := newBench(o)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, b.cleanup())
	}()

	printMachine(o)
	if o.blocked > 0 {
		return b.blockedKeys(ctx, o.blocked)
	}
	if o.auditFailures > 0 {
		return b.auditFailures(ctx, o.auditFailures)
	}
	if o.audit > 0 {
		return b.auditScan(ctx, o.audit)
	}
	if o.formats > 0 {
		return b.formats(ctx, o.formats)
	}
	if o.scale > 0 {
		return b.scale(ctx, o.scale)
	}
	if o.console > 0 {
		return b.consoleMemory(ctx, o.console)
	}

	if o.keyHops > 0 {
		if err := b.keyHops(ctx); err != nil {
			return fmt.Errorf("h-key-hops: %w", err)
		}
	}
	modes := b.modes()
	var results []*result
	for _, m := range modes {
		fmt.Printf("== %s\n", m.label)
		r, err := b.runMode(ctx, m)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		results = append(results, r)
	}
	printReport(o, results)
	return nil
}

// tracingEnv turns relay's tracing on: OTLP/HTTP to endpoint, with the
// parent-based ratio sampler at ratio (what high-volume users run).
func tracingEnv(endpoint, ratio string) []string {
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_SERVICE_NAME=relay-bench",
		"OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=" + ratio,
	}
}

// modes lists the modes o asks for, in the order they run.
func (b *bench) modes() []modeSpec {
	modes := []modeSpec{
		{name: "a-baseline", label: "(a) baseline passthrough, no txn", start: b.baselineStarter(false)},
		{name: "i-idempotent", label: "(i) baseline, idempotent producer", start: b.baselineStarter(true)},
		{name: "b-relay", label: "(b) relay, txn, default settings", start: b.relayStarter(nil)},
	}
	// Right after (b), so the two peers run as close together as they can.
	if b.o.streams != "" {
		modes = append(modes, modeSpec{name: "k-streams", label: "(k) Kafka Streams, exactly_once_v2, commit.interval.ms=100", start: b.streamsStarter()})
	}
	// value gives the admission modes their Avro records.
	value := func() ([]byte, error) {
		a, err := b.setupAdmission()
		if err != nil {
			return nil, err
		}
		return a.value, nil
	}
	// hooked runs a hook mode once per hook delay, and with -hook-serial
	// once more per delay at concurrency 1.
	hooked := func(name, label string, pct int, extra ...string) {
		for _, d := range b.o.hookDelays {
			suffix, lsuffix := "", ""
			if d > 0 || len(b.o.hookDelays) > 1 {
				suffix, lsuffix = "-"+d.String(), ", hook answers after "+d.String()
			}
			modes = append(modes, modeSpec{name: name + suffix, label: label + lsuffix, start: b.admissionStarter(pct, d, extra...), value: value})
			if extra2, _ := parseEnv(b.o.hookEnv); extra2 != nil {
				modes = append(modes, modeSpec{name: name + suffix + "-env", label: label + lsuffix + ", " + strings.Join(extra2, " "),
					start: b.admissionStarter(pct, d, append(slices.Clone(extra), extra2...)...), value: value})
			}
			if b.o.hookSerial {
				modes = append(modes, modeSpec{name: name + suffix + "-serial", label: label + lsuffix + ", RELAY_HOOK_CONCURRENCY=1",
					start: b.admissionStarter(pct, d, append(slices.Clone(extra), "RELAY_HOOK_CONCURRENCY=1")...), value: value})
			}
		}
	}
	if b.o.admission {
		modes = append(modes, modeSpec{name: "d-admission", label: "(d) relay, admission: decode + upcast + rules", start: b.admissionStarter(-1, 0), value: value})
		hooked("e-transient", "(e) relay, admission + hook, 10% fail once", 10, "RELAY_ORDERING=unordered")
	}
	if b.o.keyModes {
		hooked("f-key-ok", "(f) key ordering + hook, no failures", 0, "RELAY_ORDERING=key")
		modes = append(modes, modeSpec{name: "g-key-5pct", label: "(g) key ordering + hook, 5% of keys fail once", start: b.admissionStarter(5, 0, "RELAY_ORDERING=key"), value: value})
	}
	if b.o.otlp != "" {
		modes = append(modes,
			modeSpec{name: "t1-trace-all", label: "(t1) relay, tracing on, every record sampled", start: b.relayStarter(tracingEnv(b.o.otlp, "1.0"))},
			modeSpec{name: "t01-trace-1pct", label: "(t01) relay, tracing on, 1% sampled", start: b.relayStarter(tracingEnv(b.o.otlp, "0.01"))},
		)
	}
	extra, _ := parseEnv(b.o.relayEnv)
	if extra != nil {
		modes = append(modes, modeSpec{name: "c-relay-tuned", label: "(b+) relay, txn, " + strings.Join(extra, " "), start: b.relayStarter(extra)})
	}
	return modes
}
