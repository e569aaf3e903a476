package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/pipeline"
	"relay/internal/statetopic"
	"relay/internal/topics"
)

// A tier topic that leaves the configuration (RELAY_RETRY_TIERS changed,
// or RELAY_ORDERING=partition, which has no tiers) may still hold records
// the group has not consumed: records waiting for their next attempt, and
// the followers of blocked keys. Nothing would read them again. So at
// start-up relay looks for topics named by RELAY_RETRY_TOPIC for another
// delay (topics.RetiredTiers) and reads those that still hold records of
// its group, as retired tiers, until restarted after they are drained.

// tierFor is the configured tier a retired tier with delay stands for:
// the last one whose delay is not longer, else the first. Without a delay
// (a template without {delay}), the last.
func tierFor(delay time.Duration, tiers []config.Tier) int {
	if delay == 0 {
		return max(len(tiers)-1, 0)
	}
	i := 0
	for n, t := range tiers {
		if t.Delay <= delay {
			i = n
		}
	}
	return i
}

// committedFunc reads the group's committed offsets (the consumer's
// Committed).
type committedFunc func(tps []kafka.TopicPartition, timeoutMs int) ([]kafka.TopicPartition, error)

// retiredTiers finds, for each source, the retired tier topics that still
// hold records the group has not consumed, and says so in the log. A
// retired tier with records must have exactly its source's partitions, as
// every tier must.
func retiredTiers(ctx context.Context, a topics.Admin, committed committedFunc, cfg *config.Config, log *slog.Logger) (map[string][]pipeline.RetiredTier, error) {
	md, err := a.GetMetadata(nil, true, int(cfg.OpTimeout/time.Millisecond))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(md.Topics))
	for name := range md.Topics {
		names = append(names, name)
	}
	slices.Sort(names)
	out := map[string][]pipeline.RetiredTier{}
	for _, src := range cfg.SourceTopics {
		for _, c := range topics.RetiredTiers(cfg, src, names) {
			n := len(md.Topics[c.Topic].Partitions)
			left, err := unconsumed(ctx, cfg, committed, c.Topic, n)
			if err != nil {
				return nil, fmt.Errorf("retired tier topic %s: %w", c.Topic, err)
			}
			if left == 0 {
				continue
			}
			if want := len(md.Topics[src].Partitions); n != want {
				return nil, fmt.Errorf("retired tier topic %q holds %d records of group %s but has %d partitions; relay reads it only with exactly its source %q's %d: restore the earlier %s and %s until it is drained",
					c.Topic, left, cfg.GroupID, n, src, want, config.EnvRetryTiers, config.EnvOrdering)
			}
			rt := pipeline.RetiredTier{Topic: c.Topic, Tier: tierFor(c.Delay, cfg.RetryTiers)}
			log.Warn("tier topic no longer configured still holds records of the group; relay reads it until they are done (see the runbook, upgrades)",
				"topic", c.Topic, "records", left, "group", cfg.GroupID, "as_tier", rt.Tier)
			out[src] = append(out[src], rt)
		}
	}
	return out, nil
}

// unconsumed counts the committed records of topic past the group's
// committed offsets (from the start where it has none) that are not
// another group's (groups can share tier topic names). It reads them: an
// end offset counts transaction markers, which are not records.
func unconsumed(ctx context.Context, cfg *config.Config, committed committedFunc, topic string, partitions int) (int, error) {
	tps := make([]kafka.TopicPartition, partitions)
	for p := range tps {
		tps[p] = kafka.TopicPartition{Topic: &topic, Partition: int32(p)}
	}
	got, err := committed(tps, int(cfg.OpTimeout/time.Millisecond))
	if err != nil {
		return 0, err
	}
	from := map[int32]kafka.Offset{}
	for _, tp := range got {
		if tp.Error != nil {
			return 0, tp.Error
		}
		from[tp.Partition] = tp.Offset
		if tp.Offset < 0 {
			from[tp.Partition] = kafka.OffsetBeginning
		}
	}
	n := 0
	_, err = statetopic.ReadFrom(ctx, cfg, cfg.GroupID+".tier-check", topic, from, 2*max(cfg.TransactionTimeout, 30*time.Second),
		func(m *kafka.Message) {
			if !otherGroup(m.Headers, cfg.GroupID) {
				n++
			}
		})
	return n, err
}

// otherGroup reports whether a tier record's envelope names another
// consumer group.
func otherGroup(headers []kafka.Header, group string) bool {
	for _, h := range headers {
		if h.Key == envelope.ConsumerGroup {
			return string(h.Value) != group
		}
	}
	return false
}
