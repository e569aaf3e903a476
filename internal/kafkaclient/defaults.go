package kafkaclient

import (
	"fmt"
	"strconv"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
)

// Default is a property relay sets on one kind of client unless a
// RELAY_KAFKA_* variable sets it: librdkafka's own default is sized for
// throughput with memory to spare, relay's for a bounded footprint.
type Default struct {
	Property string
	Value    string
	Client   string // "consumer" (the loop's and every reader) or "producer"
	Why      string
	// Loop: only the transactional loop's consumer and producer get it.
	Loop bool
}

const (
	kindConsumer = "consumer"
	kindProducer = "producer"
)

// defaults name relay's clients to the brokers, and bound what they hold
// in memory. Every consumer
// (the loop's and the readers of the state topic) prefetches at most
// queued.max.messages.kbytes, plus one fetch in flight: librdkafka derives
// fetch.max.bytes from it (the smaller of 50 MB and the queue, never below
// message.max.bytes), unless fetch.max.bytes is set. The producer's queue
// holds what is produced and not yet acknowledged; relay's transactions
// are sent while they are open, not at commit, so the queue needs room for
// what is in flight, not for a whole transaction.
var defaults = []Default{
	{Property: "client.id", Value: "relay-consumer", Client: kindConsumer,
		Why: "librdkafka: rdkafka. Names relay's consumers in the brokers' request logs, metrics and quotas, apart from its producers"},
	{Property: "client.id", Value: "relay-producer", Client: kindProducer,
		Why: "librdkafka: rdkafka. Names relay's producers in the brokers' request logs, metrics and quotas, apart from its consumers"},
	{Property: "queued.max.messages.kbytes", Value: "2048", Client: kindConsumer,
		Why: "librdkafka: 65536 (64 MiB). The prefetch queue of all partitions together; librdkafka lowers fetch.max.bytes to it (not below message.max.bytes), and one fetch may arrive over it, so the consumer holds about twice this"},
	{Property: "queued.min.messages", Value: "10000", Client: kindConsumer,
		Why: "librdkafka: 100000. Bounds the prefetch of small records, whose per-record overhead the kbytes limit does not count"},
	{Property: "fetch.queue.backoff.ms", Value: "10", Client: kindConsumer,
		Why: "librdkafka: 1000. How long a partition whose prefetch queue is full waits before it is fetched again; with a small queue, 1 s would stall the loop for most of each second"},
	{Property: "queue.buffering.max.kbytes", Value: "16384", Client: kindProducer,
		Why: "librdkafka: 1048576 (1 GiB). Produced records not yet acknowledged; must be at least message.max.bytes (checked at start)"},
	{Property: "queue.buffering.max.messages", Value: "20000", Client: kindProducer,
		Why: "librdkafka: 100000. The same queue by count, for small records"},
	{Property: "go.events.channel.size", Value: "10000", Client: kindProducer,
		Why: "Go client: 1000000, allocated up front (16 MB). Delivery reports on their way to relay, which reads them at once"},
	{Property: "go.produce.channel.size", Value: "1000", Client: kindProducer,
		Why: "Go client: 1000000, allocated up front (8 MB). relay does not produce through this channel"},
	{Property: "statistics.interval.ms", Value: statsInterval, Client: kindConsumer, Loop: true,
		Why: "librdkafka: 0 (none). The loop's consumer's statistics, of which relay exports a few as relay_kafka_* metrics; 0 turns them off"},
	{Property: "statistics.interval.ms", Value: statsInterval, Client: kindProducer, Loop: true,
		Why: "librdkafka: 0 (none). The loop's producer's statistics, of which relay exports a few as relay_kafka_* metrics; 0 turns them off"},
}

// statsInterval is how often the loop's clients emit their statistics:
// often enough for a dashboard, rare enough that reading a thousand
// partitions' worth costs nothing measurable.
const statsInterval = "15000"

// Defaults lists the properties relay sets unless RELAY_KAFKA_* does, for
// the reference.
func Defaults() []Default { return append([]Default(nil), defaults...) }

// ClientIDs are the client.id of relay's consumer and producer: the
// passthrough's (RELAY_KAFKA_CLIENT_ID), else relay's defaults.
func ClientIDs(kafka map[string]string) (consumer, producer string) {
	consumer, producer = "relay-consumer", "relay-producer"
	if id := kafka["client.id"]; id != "" {
		return id, id
	}
	return consumer, producer
}

// intProps are the Go client's properties that must be ints, not the
// strings the passthrough carries.
var intProps = map[string]bool{"go.events.channel.size": true, "go.produce.channel.size": true}

// applyLoopDefaults sets the defaults of the loop's client of kind that
// the passthrough left unset.
func applyLoopDefaults(cfg *config.Config, m *kafka.ConfigMap, kind string) *kafka.ConfigMap {
	for _, d := range defaults {
		if d.Client == kind && d.Loop {
			if v, set := cfg.Kafka[d.Property]; set {
				(*m)[d.Property] = v // the passthrough's, which build leaves out
			} else {
				(*m)[d.Property] = d.Value
			}
		}
	}
	return m
}

// loopOnly are the properties only the loop's clients take, from the
// passthrough as from relay's defaults: a client whose events nobody
// reads would keep every statistics document librdkafka emits.
var loopOnly = func() map[string]bool {
	m := map[string]bool{}
	for _, d := range defaults {
		if d.Loop {
			m[d.Property] = true
		}
	}
	return m
}()

// applyDefaults sets the defaults of kind that the passthrough left unset
// (not the loop's own).
func applyDefaults(m kafka.ConfigMap, kind string) {
	for _, d := range defaults {
		if _, set := m[d.Property]; !set && d.Client == kind && !d.Loop {
			m[d.Property] = d.Value
		}
	}
	for p := range intProps {
		if s, ok := m[p].(string); ok {
			if n, err := strconv.Atoi(s); err == nil {
				m[p] = n
			}
		}
	}
}

// checkQueue refuses a producer queue smaller than the largest message it
// may have to take: librdkafka would answer every Produce of such a message
// with a full queue.
func checkQueue(cfg *config.Config, m kafka.ConfigMap) error {
	kb, kbOK := atoi(m["queue.buffering.max.kbytes"])
	maxMsg, msgOK := 1000000, true // librdkafka's default message.max.bytes
	if s, set := m["message.max.bytes"]; set {
		maxMsg, msgOK = atoi(s)
	}
	// A value that is not a number is librdkafka's to name.
	if kbOK && msgOK && int64(kb)*1024 < int64(maxMsg) {
		return &ConfigError{Var: cfg.VarForProperty("queue.buffering.max.kbytes"), Client: kindProducer,
			Err: fmt.Errorf("queue.buffering.max.kbytes=%d is less than message.max.bytes=%d: a message that large would never fit", kb, maxMsg)}
	}
	return nil
}

func atoi(v any) (int, bool) {
	n, err := strconv.Atoi(fmt.Sprint(v))
	return n, err == nil
}
