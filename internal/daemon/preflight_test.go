package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaclient"
	"relay/internal/kafkaerr"
	"relay/internal/keyorder"
)

// brokerConfigAdmin answers metadata with one broker and describes that
// broker with txnMax as transaction.max.timeout.ms ("" = describe fails).
type brokerConfigAdmin struct {
	txnMax      string
	metadataMax string // offset.metadata.max.bytes; "": not reported
}

func (a brokerConfigAdmin) GetMetadata(*string, bool, int) (*kafka.Metadata, error) {
	return &kafka.Metadata{Brokers: []kafka.BrokerMetadata{{ID: 7}}}, nil
}

func (a brokerConfigAdmin) CreateTopics(context.Context, []kafka.TopicSpecification, ...kafka.CreateTopicsAdminOption) ([]kafka.TopicResult, error) {
	return nil, errors.New("not used")
}

func (a brokerConfigAdmin) DescribeConfigs(_ context.Context, rs []kafka.ConfigResource, _ ...kafka.DescribeConfigsAdminOption) ([]kafka.ConfigResourceResult, error) {
	if a.txnMax == "" {
		return nil, kafka.NewError(kafka.ErrClusterAuthorizationFailed, "not allowed", false)
	}
	if len(rs) != 1 || rs[0].Type != kafka.ResourceBroker || rs[0].Name != "7" {
		return nil, errors.New("asked for something else than broker 7")
	}
	conf := map[string]kafka.ConfigEntryResult{
		"transaction.max.timeout.ms": {Name: "transaction.max.timeout.ms", Value: a.txnMax},
	}
	if a.metadataMax != "" {
		conf["offset.metadata.max.bytes"] = kafka.ConfigEntryResult{Name: "offset.metadata.max.bytes", Value: a.metadataMax}
	}
	return []kafka.ConfigResourceResult{{Type: kafka.ResourceBroker, Name: "7", Config: conf}}, nil
}

// A broker whose offset.metadata.max.bytes is below the default bounds
// the parked sets: with the default bound every commit of a partition
// with many parked records was refused (OFFSET_METADATA_TOO_LARGE), and
// relay aborted, parked again and was refused again. A broker that does
// not say leaves the default.
func TestParkedSetsFitTheBrokersMetadataLimit(t *testing.T) {
	lookup, environ := env(map[string]string{"RELAY_SOURCE_TOPICS": "orders", "RELAY_TRANSACTIONAL_ID": "relay-0", "RELAY_KAFKA_BOOTSTRAP_SERVERS": "b:9092"})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		reported string
		want     int
	}{{"1024", 928}, {"4096", keyorder.DefaultMetadata}, {"1000000", keyorder.DefaultMetadata}, {"50", 0}, {"", keyorder.DefaultMetadata}} {
		cfg, err := config.Load(lookup, environ)
		if err != nil {
			t.Fatal(err)
		}
		if err := fitTransactionTimeout(context.Background(), brokerConfigAdmin{txnMax: "900000", metadataMax: c.reported}, cfg, log); err != nil {
			t.Fatal(err)
		}
		if got := keyorder.MetadataFor(cfg.OffsetMetadataMax); got != c.want {
			t.Errorf("offset.metadata.max.bytes %q: parked sets bounded at %d bytes, want %d", c.reported, got, c.want)
		}
	}
}

// TestTransactionTimeoutFitsTheBroker: a broker whose
// transaction.max.timeout.ms is under relay's derived timeout gets its
// limit; a value the user set over it stops relay naming the variable; a
// broker that cannot be described leaves the timeout as it is.
func TestTransactionTimeoutFitsTheBroker(t *testing.T) {
	load := func(extra ...string) *config.Config {
		m := map[string]string{"RELAY_SOURCE_TOPICS": "orders", "RELAY_TRANSACTIONAL_ID": "relay-0", "RELAY_KAFKA_BOOTSTRAP_SERVERS": "b:9092"}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		lookup, environ := env(m)
		cfg, err := config.Load(lookup, environ)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx := context.Background()

	cfg := load()
	if err := fitTransactionTimeout(ctx, brokerConfigAdmin{txnMax: "900000"}, cfg, log); err != nil || cfg.TransactionTimeout != 36*time.Second {
		t.Errorf("default broker: %v, timeout %s", err, cfg.TransactionTimeout)
	}
	if err := fitTransactionTimeout(ctx, brokerConfigAdmin{txnMax: "20000"}, cfg, log); err != nil || cfg.Kafka["transaction.timeout.ms"] != "20000" {
		t.Errorf("broker allowing 20s: %v, transaction.timeout.ms %s", err, cfg.Kafka["transaction.timeout.ms"])
	}
	cfg = load("RELAY_KAFKA_TRANSACTION_TIMEOUT_MS", "120000")
	err := fitTransactionTimeout(ctx, brokerConfigAdmin{txnMax: "60000"}, cfg, log)
	if err == nil || !strings.Contains(err.Error(), "RELAY_KAFKA_TRANSACTION_TIMEOUT_MS") || !strings.Contains(err.Error(), "1m0s") {
		t.Errorf("user's 2m over a 1m broker limit: %v", err)
	}
	cfg = load()
	if err := fitTransactionTimeout(ctx, brokerConfigAdmin{txnMax: ""}, cfg, log); err != nil || cfg.TransactionTimeout != 36*time.Second {
		t.Errorf("broker not described: %v, timeout %s", err, cfg.TransactionTimeout)
	}
	if !strings.Contains(logs.String(), "cannot read the broker's transaction.max.timeout.ms") {
		t.Errorf("no warning when the broker cannot be described:\n%s", logs.String())
	}
}

// clusterAdmin lists brokers 1..3 in its metadata; those in away never
// answer a describe (it returns when the call's deadline passes, as
// librdkafka does for a broker it cannot reach); the others answer 15 min.
type clusterAdmin struct {
	away  map[int32]bool
	asked chan string
}

func (a clusterAdmin) GetMetadata(*string, bool, int) (*kafka.Metadata, error) {
	return &kafka.Metadata{Brokers: []kafka.BrokerMetadata{{ID: 1}, {ID: 2}, {ID: 3}}}, nil
}

func (a clusterAdmin) DescribeConfigs(ctx context.Context, rs []kafka.ConfigResource, _ ...kafka.DescribeConfigsAdminOption) ([]kafka.ConfigResourceResult, error) {
	a.asked <- rs[0].Name
	var id int32
	if _, err := fmt.Sscan(rs[0].Name, &id); err != nil {
		return nil, err
	}
	if a.away[id] {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return []kafka.ConfigResourceResult{{Type: kafka.ResourceBroker, Name: rs[0].Name, Config: map[string]kafka.ConfigEntryResult{
		"transaction.max.timeout.ms": {Name: "transaction.max.timeout.ms", Value: "900000"},
	}}}, nil
}

// The broker limit is read from a live broker, whichever the metadata
// lists first: relay asked only the first listed, and when that one was
// away its start failed. With every broker away the answer is an outage
// (*BrokersAwayError, which relay run waits out), not a skipped check.
func TestTransactionMaxFromALiveBroker(t *testing.T) {
	lookup, environ := env(map[string]string{"RELAY_SOURCE_TOPICS": "orders", "RELAY_TRANSACTIONAL_ID": "relay-0",
		"RELAY_KAFKA_BOOTSTRAP_SERVERS": "b:9092", "RELAY_OP_TIMEOUT": "300ms"})
	cfg, err := config.Load(lookup, environ)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := clusterAdmin{away: map[int32]bool{1: true}, asked: make(chan string, 10)}
	if err := kafkaclient.FitTransactionTimeout(context.Background(), a, cfg, log); err != nil {
		t.Fatalf("broker 1 away, 2 and 3 live: %v", err)
	}
	a = clusterAdmin{away: map[int32]bool{1: true, 2: true, 3: true}, asked: make(chan string, 10)}
	err = kafkaclient.FitTransactionTimeout(context.Background(), a, cfg, log)
	var away *kafkaclient.BrokersAwayError
	if !errors.As(err, &away) || !kafkaerr.Outage(err) {
		t.Fatalf("every broker away: %v; want a *BrokersAwayError that is an outage", err)
	}
	if len(a.asked) != 3 {
		t.Fatalf("asked %d brokers; want all 3", len(a.asked))
	}
}

// topicConfigAdmin describes every topic with cleanup.policy policy ("":
// refused, as without DescribeConfigs on it).
type topicConfigAdmin struct {
	brokerConfigAdmin
	policy string
}

func (a topicConfigAdmin) DescribeConfigs(_ context.Context, rs []kafka.ConfigResource, _ ...kafka.DescribeConfigsAdminOption) ([]kafka.ConfigResourceResult, error) {
	out := make([]kafka.ConfigResourceResult, len(rs))
	for i, r := range rs {
		out[i] = kafka.ConfigResourceResult{Type: r.Type, Name: r.Name}
		if a.policy == "" {
			out[i].Error = kafka.NewError(kafka.ErrTopicAuthorizationFailed, "not allowed", false)
			continue
		}
		out[i].Config = map[string]kafka.ConfigEntryResult{"cleanup.policy": {Name: "cleanup.policy", Value: a.policy}}
	}
	return out, nil
}

// Parking is refused on a compacted source: a parked follower waits,
// uncommitted, in its source partition, and compaction may remove it
// before its turn. A source relay may not describe, a deleting one, or
// parking off, pass; parking at its default is turned off instead.
func TestParkingIsRefusedOnACompactedSource(t *testing.T) {
	for _, c := range []struct {
		park, policy string
		refused      bool
		parks        int
	}{{"100", "compact", true, 100}, {"100", "compact,delete", true, 100}, {"100", "delete", false, 100}, {"100", "", false, 100}, {"0", "compact", false, 0},
		{"", "compact", false, 0}, {"", "delete", false, 10000}, {"", "", false, 0}} {
		vars := map[string]string{"RELAY_SOURCE_TOPICS": "orders", "RELAY_TRANSACTIONAL_ID": "relay-0", "RELAY_KAFKA_BOOTSTRAP_SERVERS": "b:9092", "RELAY_ORDERING": "key"}
		if c.park != "" {
			vars["RELAY_KEY_PARK_MAX_RECORDS"] = c.park
		}
		lookup, environ := env(vars)
		cfg, err := config.Load(lookup, environ)
		if err != nil {
			t.Fatal(err)
		}
		err = checkParkable(context.Background(), topicConfigAdmin{policy: c.policy}, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		var ce *ConfigError
		if refused := errors.As(err, &ce); refused != c.refused || (refused && !strings.Contains(err.Error(), "RELAY_KEY_PARK_MAX_RECORDS")) {
			t.Errorf("parking %s, cleanup.policy %q: %v, want refused %v", c.park, c.policy, err, c.refused)
		}
		if cfg.KeyParkMaxRecords != c.parks {
			t.Errorf("parking %q, cleanup.policy %q: parks %d, want %d", c.park, c.policy, cfg.KeyParkMaxRecords, c.parks)
		}
	}
}
