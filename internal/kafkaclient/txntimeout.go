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
	"relay/internal/kafkaerr"
)

// BrokerDescriber is what FitTransactionTimeout needs of an admin client.
type BrokerDescriber interface {
	GetMetadata(topic *string, allTopics bool, timeoutMs int) (*kafka.Metadata, error)
	DescribeConfigs(ctx context.Context, resources []kafka.ConfigResource, options ...kafka.DescribeConfigsAdminOption) ([]kafka.ConfigResourceResult, error)
}

// BrokersAwayError is FitTransactionTimeout's answer when no broker told
// its transaction.max.timeout.ms in time: an outage, not a verdict.
// relay run waits it out; a command reports it and goes on unchecked.
type BrokersAwayError struct{ Err error }

func (e *BrokersAwayError) Error() string {
	return "no broker answered for its transaction.max.timeout.ms: " + e.Err.Error()
}
func (e *BrokersAwayError) Unwrap() error { return e.Err }

// FitTransactionTimeout checks transaction.timeout.ms against the broker's
// transaction.max.timeout.ms before the producer asks for it: the broker
// refuses every transaction of a producer that asks for more, and its own
// error names neither the variable nor the limit. A derived timeout is
// lowered to the limit when the transaction budget still fits.
//
// An answer without the limit — a refusal to describe the brokers (no
// DescribeConfigs on the cluster) above all — skips the check with a
// warning: a refused timeout still stops relay at init, with the broker's
// message. No broker answering at all is a *BrokersAwayError.
func FitTransactionTimeout(ctx context.Context, a BrokerDescriber, cfg *config.Config, log *slog.Logger) error {
	limits, err := brokerLimits(ctx, a, cfg.OpTimeout)
	limit := limits.txnMax
	if err == nil {
		cfg.OffsetMetadataMax = limits.metadataMax
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && kafkaerr.Unreachable(err) {
		return &BrokersAwayError{Err: err}
	}
	if err != nil {
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

// limitsOf are a broker's limits relay fits itself to: its
// transaction.max.timeout.ms, and its offset.metadata.max.bytes (0 when
// it did not say), which bounds a parked set in a commit's metadata.
type limitsOf struct {
	txnMax      time.Duration
	metadataMax int
}

// brokerLimits reads the limits from the first of the brokers in the
// metadata to answer; brokers of a cluster normally share them. All are
// asked at once: the metadata still lists a broker that went away seconds
// ago (until the controller fences it), and one that is away answers only
// when the call times out. The first answer that is not
// unreachable (kafkaerr.Unreachable) — a value, or a refused describe — is the
// one; when every broker failed, the errors are returned together.
func brokerLimits(ctx context.Context, a BrokerDescriber, timeout time.Duration) (limitsOf, error) {
	md, err := a.GetMetadata(nil, false, int(timeout/time.Millisecond))
	if err != nil {
		return limitsOf{}, err
	}
	if len(md.Brokers) == 0 {
		return limitsOf{}, kafka.NewError(kafka.ErrAllBrokersDown, "no broker in the metadata", false)
	}
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type answer struct {
		limits limitsOf
		err    error
	}
	answers := make(chan answer, len(md.Brokers))
	for _, b := range md.Brokers {
		go func() {
			limits, err := describeLimits(c, a, b.ID)
			answers <- answer{limits, err}
		}()
	}
	// Every goroutine is waited for: cancel makes the slow ones return.
	var errs []error
	var found *answer
	for range md.Brokers {
		an := <-answers
		switch {
		case found != nil:
		case an.err == nil || !kafkaerr.Unreachable(an.err):
			found = &an
			cancel()
		default:
			errs = append(errs, an.err)
		}
	}
	if found != nil {
		return found.limits, found.err
	}
	return limitsOf{}, errors.Join(errs...)
}

// describeLimits asks broker id for its transaction.max.timeout.ms and
// offset.metadata.max.bytes.
func describeLimits(ctx context.Context, a BrokerDescriber, id int32) (limitsOf, error) {
	res, err := a.DescribeConfigs(ctx, []kafka.ConfigResource{{Type: kafka.ResourceBroker, Name: strconv.Itoa(int(id))}})
	if err != nil {
		return limitsOf{}, fmt.Errorf("broker %d: %w", id, err)
	}
	for _, r := range res {
		if r.Error.Code() != kafka.ErrNoError {
			return limitsOf{}, fmt.Errorf("broker %d: %w", id, r.Error)
		}
		var l limitsOf
		if e, ok := r.Config["offset.metadata.max.bytes"]; ok {
			if n, err := strconv.Atoi(e.Value); err == nil && n > 0 {
				l.metadataMax = n
			}
		}
		if e, ok := r.Config["transaction.max.timeout.ms"]; ok {
			n, err := strconv.ParseInt(e.Value, 10, 64)
			if err != nil || n <= 0 {
				return limitsOf{}, fmt.Errorf("broker %d: transaction.max.timeout.ms %q is not a number of milliseconds", id, e.Value)
			}
			l.txnMax = time.Duration(n) * time.Millisecond
			return l, nil
		}
	}
	return limitsOf{}, fmt.Errorf("broker %d did not report transaction.max.timeout.ms", id)
}

// FitForCommand is FitTransactionTimeout for an operator command that
// writes transactions: a command does not wait for the brokers (its own
// calls say whether they are away), so their absence is a warning and nil.
func FitForCommand(ctx context.Context, a BrokerDescriber, cfg *config.Config, log *slog.Logger) error {
	err := FitTransactionTimeout(ctx, a, cfg, log)
	var away *BrokersAwayError
	if errors.As(err, &away) {
		log.Warn("transaction.timeout.ms is not checked against the brokers' limit", "err", err)
		return nil
	}
	return err
}
