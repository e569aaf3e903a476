package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
)

// brokerConfigAdmin answers metadata with one broker and describes that
// broker with txnMax as transaction.max.timeout.ms ("" = describe fails).
type brokerConfigAdmin struct{ txnMax string }

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
	return []kafka.ConfigResourceResult{{Type: kafka.ResourceBroker, Name: "7", Config: map[string]kafka.ConfigEntryResult{
		"transaction.max.timeout.ms": {Name: "transaction.max.timeout.ms", Value: a.txnMax},
	}}}, nil
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
	if err := fitTransactionTimeout(ctx, brokerConfigAdmin{"900000"}, cfg, log); err != nil || cfg.TransactionTimeout != time.Minute {
		t.Errorf("default broker: %v, timeout %s", err, cfg.TransactionTimeout)
	}
	if err := fitTransactionTimeout(ctx, brokerConfigAdmin{"20000"}, cfg, log); err != nil || cfg.Kafka["transaction.timeout.ms"] != "20000" {
		t.Errorf("broker allowing 20s: %v, transaction.timeout.ms %s", err, cfg.Kafka["transaction.timeout.ms"])
	}
	cfg = load("RELAY_KAFKA_TRANSACTION_TIMEOUT_MS", "120000")
	err := fitTransactionTimeout(ctx, brokerConfigAdmin{"60000"}, cfg, log)
	if err == nil || !strings.Contains(err.Error(), "RELAY_KAFKA_TRANSACTION_TIMEOUT_MS") || !strings.Contains(err.Error(), "1m0s") {
		t.Errorf("user's 2m over a 1m broker limit: %v", err)
	}
	cfg = load()
	if err := fitTransactionTimeout(ctx, brokerConfigAdmin{""}, cfg, log); err != nil || cfg.TransactionTimeout != time.Minute {
		t.Errorf("broker not described: %v, timeout %s", err, cfg.TransactionTimeout)
	}
	if !strings.Contains(logs.String(), "cannot read the broker's transaction.max.timeout.ms") {
		t.Errorf("no warning when the broker cannot be described:\n%s", logs.String())
	}
}
