package kafkaclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
)

// BrokerDescriber is what FitTransactionTimeout needs of an admin client.
type BrokerDescriber interface {
	GetMetadata(topic *string, allTopics bool, timeoutMs int) (*kafka.Metadata, error)
	DescribeConfigs(ctx context.Context, resources []kafka.ConfigResource, options ...kafka.DescribeConfigsAdminOption) ([]kafka.ConfigResourceResult, error)
}

// FitTransactionTimeout checks transaction.timeout.ms against the broker's
// transaction.max.timeout.ms before the producer asks for it: the broker
// refuses every transaction of a producer that asks for more, and its own
// error names neither the variable nor the limit. A derived timeout is
// lowered to the limit when the transaction budget still fits.
func FitTransactionTimeout(ctx context.Context, a BrokerDescriber, cfg *config.Config, log *slog.Logger) error {
	limit, err := brokerTransactionMax(ctx, a, cfg.OpTimeout)
	if err != nil {
		// No permission to describe the broker, say: a refused timeout
		// still stops relay at init, with the broker's message.
		log.Warn("cannot read the broker's transaction.max.timeout.ms; transaction.timeout.ms is not checked against it", "err", err)
		return nil
	}
	lowered, err := cfg.FitBrokerTransactionMax(limit)
	if lowered {
		log.Info("transaction.timeout.ms lowered to the broker's transaction.max.timeout.ms",
			"transaction_timeout", cfg.TransactionTimeout.String())
	}
	return err
}

// brokerTransactionMax reads transaction.max.timeout.ms from one broker;
// brokers of a cluster normally share it.
func brokerTransactionMax(ctx context.Context, a BrokerDescriber, timeout time.Duration) (time.Duration, error) {
	md, err := a.GetMetadata(nil, false, int(timeout/time.Millisecond))
	if err != nil {
		return 0, err
	}
	if len(md.Brokers) == 0 {
		return 0, errors.New("no broker in the metadata")
	}
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := a.DescribeConfigs(c, []kafka.ConfigResource{{Type: kafka.ResourceBroker, Name: strconv.Itoa(int(md.Brokers[0].ID))}})
	if err != nil {
		return 0, err
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			return 0, r.Error
		}
		if e, ok := r.Config["transaction.max.timeout.ms"]; ok {
			n, err := strconv.ParseInt(e.Value, 10, 64)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("transaction.max.timeout.ms %q is not a number of milliseconds", e.Value)
			}
			return time.Duration(n) * time.Millisecond, nil
		}
	}
	return 0, errors.New("the broker did not report transaction.max.timeout.ms")
}
