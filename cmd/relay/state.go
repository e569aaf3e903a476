package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
)

// stateLoader reads partitions of the state topic, committed records only,
// from their start to their end (the last stable offset), with one
// consumer, and returns the latest value of each key (nil for a
// tombstone). It waits out a broker outage; only ctx ends it early.
func stateLoader(cfg *config.Config) func(ctx context.Context, partitions []int32) (map[string][]byte, error) {
	topic := cfg.StateTopicName()
	return func(ctx context.Context, partitions []int32) (map[string][]byte, error) {
		backoff := 200 * time.Millisecond
		for {
			out, err := loadState(ctx, cfg, topic, partitions)
			if err == nil || ctx.Err() != nil {
				return out, err
			}
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
	c, err := kafka.NewConsumer(clientConfig(cfg, producerOnly, kafka.ConfigMap{
		// Assigned, never subscribed: the group is only a name.
		"group.id": cfg.GroupID + ".state-restore", "enable.auto.commit": false,
		"isolation.level": "read_committed", "enable.partition.eof": true,
	}))
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	tps := make([]kafka.TopicPartition, len(partitions))
	for i, p := range partitions {
		tps[i] = kafka.TopicPartition{Topic: &topic, Partition: p, Offset: kafka.OffsetBeginning}
	}
	if err := c.Assign(tps); err != nil {
		return nil, err
	}
	eof := map[int32]bool{}
	out := map[string][]byte{}
	deadline := time.Now().Add(2 * max(cfg.TransactionTimeout, 30*time.Second))
	for ctx.Err() == nil {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s %v: end not reached by %s", topic, partitions, deadline.Format(time.RFC3339))
		}
		switch ev := c.Poll(200).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				return nil, ev.TopicPartition.Error
			}
			out[string(ev.Key)] = ev.Value
			delete(eof, ev.TopicPartition.Partition)
		case kafka.PartitionEOF:
			eof[ev.Partition] = true
			if len(eof) == len(partitions) {
				return out, nil
			}
		case kafka.Error:
			if ev.IsFatal() {
				return nil, ev
			}
		}
	}
	return nil, errors.Join(ctx.Err(), errors.New("restore interrupted"))
}
