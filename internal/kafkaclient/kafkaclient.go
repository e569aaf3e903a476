// Package kafkaclient builds every Kafka client relay uses, from one
// configuration: the passthrough (RELAY_KAFKA_*, without the properties
// only the other kind of client understands) with relay's managed
// properties on top. config rejects managed properties in the
// passthrough, so nothing is overridden silently.
//
// One function per kind of client: the loop's consumer and transactional
// producer, readers of relay's own topics, the watermark probe, the
// transactional writer of operator commands, and admin clients. Consumers
// and producers get relay's bounded defaults (defaults.go) under the
// passthrough.
package kafkaclient

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
)

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
	// The Go client's: the consumer would take the first (relay polls,
	// so it has no use for it) and refuse the second.
	"go.events.channel.size": true, "go.produce.channel.size": true,
}

// Option changes a client's configuration before it is built.
type Option func(kafka.ConfigMap)

// WithLogs sends the client's log lines to logs (see ForwardLogs) instead
// of librdkafka's stderr.
func WithLogs(logs chan kafka.LogEvent) Option {
	return func(m kafka.ConfigMap) {
		m["go.logs.channel.enable"] = true
		m["go.logs.channel"] = logs
	}
}

// offline drops the bootstrap servers: the client cannot connect, and
// librdkafka still checks every property.
func offline(m kafka.ConfigMap) { delete(m, "bootstrap.servers") }

// build is the passthrough without the other kind's properties, with
// relay's defaults for kind under it ("" for none, and for neither
// kind's properties), and the managed properties and then the options on
// top.
func build(cfg *config.Config, kind string, managed kafka.ConfigMap, opts []Option) *kafka.ConfigMap {
	m := kafka.ConfigMap{}
	for k, v := range cfg.Kafka {
		// The loop's own (statistics.interval.ms) are applyLoopDefaults':
		// no other client reads its statistics.
		skipped := (kind != kindConsumer && consumerOnly[k]) || (kind != kindProducer && producerOnly[k]) || loopOnly[k]
		if !skipped {
			m[k] = v
		}
	}
	// A secret read from a file: its value now, so a client built after a
	// rotation has the new one.
	for k, v := range cfg.KafkaSecrets {
		if _, ok := m[k]; ok {
			m[k] = v.Get()
		}
	}
	applyDefaults(m, kind)
	for k, v := range managed {
		m[k] = v
	}
	for _, o := range opts {
		o(m)
	}
	return &m
}

func loopConsumerConfig(cfg *config.Config, opts []Option) *kafka.ConfigMap {
	managed := kafka.ConfigMap{
		"group.id":                 cfg.GroupID,
		"enable.auto.commit":       false,
		"enable.auto.offset.store": false,
		// Read only committed records: what an aborted transaction wrote
		// upstream never reaches relay's outputs.
		"isolation.level": "read_committed",
	}
	if cfg.GroupInstanceID != "" {
		// A static member (KIP-345): see config.EnvStaticMembership.
		managed["group.instance.id"] = cfg.GroupInstanceID
	}
	return applyLoopDefaults(cfg, build(cfg, kindConsumer, managed, opts), kindConsumer)
}

func loopProducerConfig(cfg *config.Config, opts []Option) *kafka.ConfigMap {
	return applyLoopDefaults(cfg, build(cfg, kindProducer, kafka.ConfigMap{
		"transactional.id": cfg.TransactionalID,
		// The commit says whether every message of the transaction was
		// written; the reports of failed deliveries say which source
		// partition to hold back (see txn's stalls). The Go client
		// refuses delivery.report.only.error, so every delivery is
		// reported, without its fields, and the loop drops the good ones.
		"go.delivery.reports":       true,
		"go.delivery.report.fields": "none",
	}, opts), kindProducer)
}

// LoopConsumer is the transactional loop's consumer: the group's member,
// read_committed, offsets committed only through the transaction.
func LoopConsumer(cfg *config.Config, opts ...Option) (*kafka.Consumer, error) {
	return kafka.NewConsumer(loopConsumerConfig(cfg, opts))
}

// LoopProducer is the transactional loop's producer, with the instance's
// transactional id.
func LoopProducer(cfg *config.Config, opts ...Option) (*kafka.Producer, error) {
	return kafka.NewProducer(loopProducerConfig(cfg, opts))
}

// Read says how a Reader reads.
type Read struct {
	// EOF: report the end of each assigned partition (kafka.PartitionEOF).
	EOF bool
	// Uncommitted: read_uncommitted; a read_committed client is told the
	// last stable offset as the high watermark, which stops at the first
	// open transaction.
	Uncommitted bool
	// FetchWaitMaxMs, when set, bounds how long the broker holds a fetch.
	FetchWaitMaxMs int
}

// Reader is a consumer of relay's own topics (the state topic, the ledger,
// watermark probes): it never joins a group (the caller assigns) and never
// commits; group names only its connections.
func Reader(cfg *config.Config, group string, r Read) (*kafka.Consumer, error) {
	m := kafka.ConfigMap{"group.id": group, "enable.auto.commit": false, "isolation.level": "read_committed"}
	if r.Uncommitted {
		m["isolation.level"] = "read_uncommitted"
	}
	if r.EOF {
		m["enable.partition.eof"] = true
	}
	if r.FetchWaitMaxMs > 0 {
		m["fetch.wait.max.ms"] = r.FetchWaitMaxMs
	}
	return kafka.NewConsumer(build(cfg, kindConsumer, m, nil))
}

// Probe is a reader for watermark queries: read_uncommitted, so the high
// watermark it is told is the partition's end.
func Probe(cfg *config.Config) (*kafka.Consumer, error) {
	return Reader(cfg, cfg.ReaderGroup("probe"), Read{Uncommitted: true})
}

// Writer is a transactional producer of an operator command (the ledger
// writer of discard and replay), with a transactional id of its own and no
// delivery reports: the commit says whether everything was written.
func Writer(cfg *config.Config, transactionalID string) (*kafka.Producer, error) {
	return kafka.NewProducer(build(cfg, kindProducer, kafka.ConfigMap{
		"transactional.id": transactionalID, "go.delivery.reports": false,
	}, nil))
}

// Admin is an admin client for operator commands.
func Admin(cfg *config.Config) (*kafka.AdminClient, error) {
	return kafka.NewAdminClient(build(cfg, "", kafka.ConfigMap{}, nil))
}

// Producer is a plain producer with no transactions and no managed
// properties, for its metadata and watermark queries and to share its
// connections with an admin client (kafka.NewAdminClientFromProducer).
func Producer(cfg *config.Config) (*kafka.Producer, error) {
	return kafka.NewProducer(build(cfg, "", kafka.ConfigMap{}, nil))
}

// ConfigError is librdkafka's rejection of a passthrough property, with the
// variable that set it.
type ConfigError struct {
	Var    string // the RELAY_KAFKA_* variable, or RELAY_KAFKA_* when unknown
	Client string // consumer or producer
	Err    error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("%s: rejected by librdkafka (%s): %v", e.Var, e.Client, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// propInMessage finds the property in librdkafka's messages and in the Go
// client's ("go.events.channel.size expects type int, not string").
var propInMessage = regexp.MustCompile(`property:? "([^"]+)"|^(go\.[a-z.]+) expects type`)

// AsConfigError reads err, from building a client, as a configuration error
// naming the variable.
func AsConfigError(cfg *config.Config, client string, err error) *ConfigError {
	name := "RELAY_KAFKA_*"
	if m := propInMessage.FindStringSubmatch(err.Error()); m != nil {
		name = cfg.VarForProperty(m[1] + m[2])
	}
	return &ConfigError{Var: name, Client: client, Err: err}
}

// Validate lets librdkafka check every passthrough property before anything
// connects: the loop's clients are built without bootstrap servers, so they
// cannot reach a broker, and closed again at once.
func Validate(cfg *config.Config) error {
	c, err := kafka.NewConsumer(loopConsumerConfig(cfg, []Option{offline}))
	if err != nil {
		return AsConfigError(cfg, "consumer", err)
	}
	_ = c.Close()
	pm := loopProducerConfig(cfg, []Option{offline})
	if err := checkQueue(cfg, *pm); err != nil {
		return err
	}
	p, err := kafka.NewProducer(pm)
	if err != nil {
		return AsConfigError(cfg, "producer", err)
	}
	p.Close()
	return nil
}

// ForwardLogs writes librdkafka's log events (syslog levels) to log until
// logs is closed.
func ForwardLogs(logs <-chan kafka.LogEvent, log *slog.Logger) {
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
		log.Log(context.Background(), level, ev.Message, "logger", "librdkafka", "client", ev.Name, "tag", ev.Tag)
	}
}
