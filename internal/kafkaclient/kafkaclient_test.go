package kafkaclient

import (
	"errors"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
)

func testConfig(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	base := map[string]string{
		"RELAY_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "RELAY_SOURCE_TOPICS": "orders",
		"RELAY_GROUP_ID": "g", "RELAY_TRANSACTIONAL_ID": "t",
	}
	for k, v := range env {
		base[k] = v
	}
	var environ []string
	for k, v := range base {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := base[k]; return v, ok }, environ)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestEachClientGetsOnlyItsProperties(t *testing.T) {
	cfg := testConfig(t, map[string]string{"RELAY_KAFKA_LINGER_MS": "7", "RELAY_KAFKA_FETCH_MIN_BYTES": "9"})
	cons := *loopConsumerConfig(cfg, nil)
	prod := *loopProducerConfig(cfg, nil)
	if _, ok := cons["linger.ms"]; ok {
		t.Errorf("consumer got the producer's linger.ms")
	}
	if _, ok := prod["fetch.min.bytes"]; ok {
		t.Errorf("producer got the consumer's fetch.min.bytes")
	}
	if cons["fetch.min.bytes"] != "9" || prod["linger.ms"] != "7" {
		t.Errorf("passthrough lost: consumer %v, producer %v", cons["fetch.min.bytes"], prod["linger.ms"])
	}
	if cons["isolation.level"] != "read_committed" || cons["enable.auto.commit"] != false || prod["transactional.id"] != "t" {
		t.Errorf("managed properties missing: %v / %v", cons, prod)
	}
	admin := *build(cfg, "", kafka.ConfigMap{}, nil)
	if _, ok := admin["linger.ms"]; ok {
		t.Errorf("admin got linger.ms")
	}
}

func TestValidateNamesTheVariable(t *testing.T) {
	cfg := testConfig(t, map[string]string{"RELAY_KAFKA_SOCKET_TIMEOUT_MS": "not-a-number"})
	err := Validate(cfg)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Var != "RELAY_KAFKA_SOCKET_TIMEOUT_MS" {
		t.Fatalf("Validate = %v, want a ConfigError naming RELAY_KAFKA_SOCKET_TIMEOUT_MS", err)
	}
	if err := Validate(testConfig(t, nil)); err != nil {
		t.Fatalf("a good configuration was refused: %v", err)
	}
	// The derived transaction timeout makes room for the producer's
	// timeouts set longer than it would be: librdkafka refuses a
	// transactional producer whose timeouts do not fit in it.
	for _, v := range []string{"RELAY_KAFKA_SOCKET_TIMEOUT_MS", "RELAY_KAFKA_DELIVERY_TIMEOUT_MS", "RELAY_KAFKA_MESSAGE_TIMEOUT_MS"} {
		if err := Validate(testConfig(t, map[string]string{v: "60000"})); err != nil {
			t.Errorf("%s=60000 with the transaction timeout derived: %v", v, err)
		}
	}
}

// The loop's consumer is a static member unless told otherwise: the loop
// relies on it to tell a twin from the coordinator's own fence, and a
// consumer without a group.instance.id would let every fence after a lost
// assignment be recovered from. Only the loop's consumer joins a group.
func TestLoopConsumerIsAStaticMember(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		want any // nil: no group.instance.id
	}{
		"default":         {env: nil, want: "t"},
		"passthrough":     {env: map[string]string{"RELAY_KAFKA_GROUP_INSTANCE_ID": "relay-0"}, want: "relay-0"},
		"dynamic, by env": {env: map[string]string{"RELAY_STATIC_MEMBERSHIP": "false"}, want: nil},
	} {
		cfg := testConfig(t, tc.env)
		got, set := (*loopConsumerConfig(cfg, nil))["group.instance.id"]
		if (tc.want == nil && set) || (tc.want != nil && got != tc.want) {
			t.Errorf("%s: group.instance.id %v (set %v), want %v", name, got, set, tc.want)
		}
		if cfg.StaticMembership != (tc.want != nil) {
			t.Errorf("%s: StaticMembership %v", name, cfg.StaticMembership)
		}
	}
}
