package statetopic

import (
	"context"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaerr"
	"relay/internal/retry"
)

// Loader reads partitions of the state topic, committed records only,
// from their start to their end, with one consumer, and returns the latest
// value of each key (nil for a tombstone). It waits out a broker outage,
// saying so, waiting 200 ms at first, doubling up to 5 s (retry.Schedule); only ctx ends it early. An error the
// broker will not change its mind on (not authorised, no such topic) is
// returned at once.
//
// alive hears each retry: waiting out an outage is progress, not a stuck
// loop (the restore runs inside the loop's rebalance callback).
func Loader(cfg *config.Config, log *slog.Logger, alive func()) func(ctx context.Context, partitions []int32) (map[string][]byte, error) {
	topic := cfg.StateTopicName()
	return func(ctx context.Context, partitions []int32) (map[string][]byte, error) {
		load := func() (map[string][]byte, error) {
			alive() // each attempt is a stretch of its own for the liveness bound
			out, err := load(ctx, cfg, topic, partitions)
			if err != nil && (ctx.Err() != nil || kafkaerr.Permanent(err)) {
				return nil, backoff.Permanent(err)
			}
			return out, err
		}
		return retry.Do(ctx, load, 200*time.Millisecond, 5*time.Second, func(err error, in time.Duration) {
			alive()
			log.Warn("cannot read the state topic yet; retrying", "topic", topic, "partitions", partitions, "err", err, "in", in.String())
		})
	}
}

func load(ctx context.Context, cfg *config.Config, topic string, partitions []int32) (map[string][]byte, error) {
	out := map[string][]byte{}
	_, err := ReadToEnd(ctx, cfg, cfg.GroupID+".state-restore", topic, partitions, 2*max(cfg.TransactionTimeout, 30*time.Second),
		func(m *kafka.Message) { out[string(m.Key)] = m.Value })
	if err != nil {
		return nil, err
	}
	return out, nil
}
