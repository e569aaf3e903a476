package kafkaclient

import (
	"errors"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func TestDefaultsGoToTheirKindOnly(t *testing.T) {
	cfg := testConfig(t, nil)
	cons := *loopConsumerConfig(cfg, nil)
	prod := *loopProducerConfig(cfg, nil)
	reader := *build(cfg, kindConsumer, kafka.ConfigMap{}, nil)
	admin := *build(cfg, "", kafka.ConfigMap{}, nil)
	both := map[string]bool{"client.id": true, "statistics.interval.ms": true}
	for _, d := range defaults {
		want, other := cons, prod
		if d.Client == kindProducer {
			want, other = prod, cons
		}
		if _, ok := want[d.Property]; !ok {
			t.Errorf("%s: not set on the %s", d.Property, d.Client)
		}
		// client.id and statistics.interval.ms are defaults of both
		// kinds, each its own.
		if v, ok := other[d.Property]; ok && v == d.Value && !both[d.Property] {
			t.Errorf("%s: set on the wrong kind of client", d.Property)
		}
		if _, ok := admin[d.Property]; ok {
			t.Errorf("%s: set on the admin client", d.Property)
		}
		// A reader gets the consumers' defaults, not the loop's own: it
		// does not read statistics.
		if _, ok := reader[d.Property]; d.Client == kindConsumer && ok == d.Loop {
			t.Errorf("%s: on a reader %v, want %v", d.Property, ok, !d.Loop)
		}
	}
}

func TestPassthroughOverridesDefaults(t *testing.T) {
	cfg := testConfig(t, map[string]string{
		"RELAY_KAFKA_QUEUED_MAX_MESSAGES_KBYTES": "65536", "RELAY_KAFKA_FETCH_QUEUE_BACKOFF_MS": "1000",
		"RELAY_KAFKA_QUEUE_BUFFERING_MAX_KBYTES": "1048576", "RELAY_KAFKA_GO_EVENTS_CHANNEL_SIZE": "1000000",
		"RELAY_KAFKA_GO_PRODUCE_CHANNEL_SIZE": "1000000", "RELAY_KAFKA_STATISTICS_INTERVAL_MS": "0",
	})
	cons := *loopConsumerConfig(cfg, nil)
	prod := *loopProducerConfig(cfg, nil)
	if cons["queued.max.messages.kbytes"] != "65536" || cons["fetch.queue.backoff.ms"] != "1000" {
		t.Errorf("consumer kept relay's defaults over the passthrough: %v", cons)
	}
	if cons["statistics.interval.ms"] != "0" || prod["statistics.interval.ms"] != "0" {
		t.Errorf("statistics.interval.ms=0 from the passthrough: consumer %v, producer %v", cons["statistics.interval.ms"], prod["statistics.interval.ms"])
	}
	if prod["queue.buffering.max.kbytes"] != "1048576" {
		t.Errorf("producer kept relay's default over the passthrough: %v", prod["queue.buffering.max.kbytes"])
	}
	// The Go client takes its channel sizes as ints only.
	if prod["go.events.channel.size"] != 1000000 || prod["go.produce.channel.size"] != 1000000 {
		t.Errorf("go.* sizes: %#v, %#v", prod["go.events.channel.size"], prod["go.produce.channel.size"])
	}
	if err := Validate(cfg); err != nil {
		t.Fatalf("librdkafka's defaults, set explicitly, were refused: %v", err)
	}
}

func TestDefaultsPassLibrdkafka(t *testing.T) {
	// Validate builds both loop clients; a reader is a consumer with the
	// same defaults, built here too.
	cfg := testConfig(t, nil)
	if err := Validate(cfg); err != nil {
		t.Fatalf("relay's defaults were refused: %v", err)
	}
	c, err := kafka.NewConsumer(build(cfg, kindConsumer, kafka.ConfigMap{"group.id": "r"}, []Option{offline}))
	if err != nil {
		t.Fatalf("a reader with relay's defaults was refused: %v", err)
	}
	_ = c.Close()
}

func TestValidateRefusesAQueueSmallerThanAMessage(t *testing.T) {
	cfg := testConfig(t, map[string]string{"RELAY_KAFKA_QUEUE_BUFFERING_MAX_KBYTES": "512"})
	var ce *ConfigError
	if err := Validate(cfg); !errors.As(err, &ce) || ce.Var != "RELAY_KAFKA_QUEUE_BUFFERING_MAX_KBYTES" {
		t.Fatalf("Validate = %v, want a ConfigError naming RELAY_KAFKA_QUEUE_BUFFERING_MAX_KBYTES", err)
	}
	cfg = testConfig(t, map[string]string{"RELAY_KAFKA_MESSAGE_MAX_BYTES": "33554432"})
	if err := Validate(cfg); !errors.As(err, &ce) || ce.Var != "RELAY_KAFKA_QUEUE_BUFFERING_MAX_KBYTES" {
		t.Fatalf("Validate = %v, want the default queue refused for 32 MiB messages", err)
	}
	cfg = testConfig(t, map[string]string{"RELAY_KAFKA_MESSAGE_MAX_BYTES": "33554432", "RELAY_KAFKA_QUEUE_BUFFERING_MAX_KBYTES": "65536"})
	if err := Validate(cfg); err != nil {
		t.Fatalf("a queue that fits the messages was refused: %v", err)
	}
}

func TestValidateNamesABadGoProperty(t *testing.T) {
	cfg := testConfig(t, map[string]string{"RELAY_KAFKA_GO_EVENTS_CHANNEL_SIZE": "many"})
	var ce *ConfigError
	if err := Validate(cfg); !errors.As(err, &ce) || ce.Var != "RELAY_KAFKA_GO_EVENTS_CHANNEL_SIZE" {
		t.Fatalf("Validate = %v, want a ConfigError naming RELAY_KAFKA_GO_EVENTS_CHANNEL_SIZE", err)
	}
}
