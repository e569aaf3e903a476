package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
)

// stateLoader reads partitions of the state topic, committed records only,
// from their start to their end (the last stable offset), with one
// consumer, and returns the latest value of each key (nil for a
// tombstone). It waits out a broker outage, saying so; only ctx ends it
// early. An error the broker will not change its mind on (not authorised,
// no such topic) is returned at once.
func stateLoader(cfg *config.Config, log *slog.Logger) func(ctx context.Context, partitions []int32) (map[string][]byte, error) {
	topic := cfg.StateTopicName()
	return func(ctx context.Context, partitions []int32) (map[string][]byte, error) {
		backoff := 200 * time.Millisecond
		for {
			out, err := loadState(ctx, cfg, topic, partitions)
			if err == nil || ctx.Err() != nil {
				return out, err
			}
			var ke kafka.Error
			if errors.As(err, &ke) && (ke.IsFatal() || ke.Code() == kafka.ErrTopicAuthorizationFailed ||
				ke.Code() == kafka.ErrGroupAuthorizationFailed || ke.Code() == kafka.ErrUnknownTopicOrPart) {
				return nil, err
			}
			log.Warn("cannot read the state topic yet; retrying", "topic", topic, "partitions", partitions, "err", err, "in", backoff.String())
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

func loadState(ctx context.Context, cfg *config.Config, topic string, partitions []int32) (map[string][]byte, error) {
	out := map[string][]byte{}
	_, err := readToEnd(ctx, cfg, cfg.GroupID+".state-restore", topic, partitions, 2*max(cfg.TransactionTimeout, 30*time.Second),
		func(m *kafka.Message) { out[string(m.Key)] = m.Value })
	if err != nil {
		return nil, err
	}
	return out, nil
}
