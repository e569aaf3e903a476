package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
)

// readToEnd reads partitions of topic from their start to their end,
// committed records only (read_committed: the end is the last stable
// offset), and calls each for every record. group only names the reader:
// it is assigned, never subscribed, and commits nothing. Reaching no end
// within bound is an error.
func readToEnd(ctx context.Context, cfg *config.Config, group, topic string, partitions []int32, bound time.Duration, each func(*kafka.Message)) error {
	c, err := kafka.NewConsumer(clientConfig(cfg, producerOnly, kafka.ConfigMap{
		"group.id": group, "enable.auto.commit": false,
		"isolation.level": "read_committed", "enable.partition.eof": true,
	}))
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	tps := make([]kafka.TopicPartition, len(partitions))
	for i, p := range partitions {
		tps[i] = kafka.TopicPartition{Topic: &topic, Partition: p, Offset: kafka.OffsetBeginning}
	}
	if err := c.Assign(tps); err != nil {
		return err
	}
	eof := map[int32]bool{}
	deadline := time.Now().Add(bound)
	for ctx.Err() == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %v: end not reached within %s", topic, partitions, bound)
		}
		switch ev := c.Poll(200).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				return ev.TopicPartition.Error
			}
			each(ev)
			delete(eof, ev.TopicPartition.Partition)
		case kafka.PartitionEOF:
			eof[ev.Partition] = true
			if len(eof) == len(partitions) {
				return nil
			}
		case kafka.Error:
			if ev.IsFatal() {
				return ev
			}
		}
	}
	return errors.Join(ctx.Err(), fmt.Errorf("reading %s interrupted", topic))
}
