package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaclient"
)

// read reads the source window, then every derived topic and the ledger
// to their ends at the cut.
func (s *scan) read(ctx context.Context) error {
	from := map[int32]kafka.Offset{}
	ends := map[int32]int64{}
	for p, pt := range s.parts {
		if pt.base < pt.hi {
			from[p], ends[p] = kafka.Offset(pt.base), pt.hi
		}
	}
	if err := s.readTopic(ctx, s.source, from, ends, s.sourceRecord); err != nil {
		return err
	}
	for _, d := range s.topics {
		from, ends := map[int32]kafka.Offset{}, map[int32]int64{}
		for p, end := range s.ends[d.topic] {
			if low := s.lows[d.topic][p]; low < end {
				from[p], ends[p] = kafka.Offset(low), end
			}
		}
		var each func(*kafka.Message)
		switch d.role {
		case roleOutput:
			each = s.outputRecord
		case roleLedger:
			each = s.ledgerRecord
		default:
			each = s.envelopeRecord(d)
		}
		if err := s.readTopic(ctx, d.topic, from, ends, each); err != nil {
			return err
		}
	}
	return nil
}

// readTopic reads topic's partitions from from to ends, read_committed.
func (s *scan) readTopic(ctx context.Context, topic string, from map[int32]kafka.Offset, ends map[int32]int64, each func(*kafka.Message)) error {
	if len(from) == 0 {
		return nil
	}
	c, err := kafkaclient.Reader(s.cfg, s.cfg.GroupID+".audit", kafkaclient.Read{EOF: true})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	var tps []kafka.TopicPartition
	left := map[int32]int64{}
	for p, off := range from {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p, Offset: off})
		left[p] = ends[p]
	}
	if err := c.Assign(tps); err != nil {
		return fmt.Errorf("assign %s: %w", topic, err)
	}
	reached := func(p int32, next int64) {
		if end, ok := left[p]; ok && next >= end {
			delete(left, p)
		}
	}
	deadline := time.Now().Add(bound)
	lastTell := time.Now()
	for len(left) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: end not reached within %s (a transaction still open?)", topic, bound)
		}
		switch ev := c.Poll(100).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				return fmt.Errorf("%s[%d]: %w", topic, ev.TopicPartition.Partition, ev.TopicPartition.Error)
			}
			p, off := ev.TopicPartition.Partition, int64(ev.TopicPartition.Offset)
			if end, ok := left[p]; ok && off < end {
				each(ev)
				s.read1++
			}
			reached(p, off+1)
		case kafka.PartitionEOF:
			reached(ev.Partition, int64(ev.Offset))
		case kafka.Error:
			if ev.IsFatal() {
				return ev
			}
		case nil:
			// Aborted records and markers move the position
			// without a message.
			if pos, err := c.Position(tps); err == nil {
				for _, tp := range pos {
					if tp.Offset >= 0 {
						reached(tp.Partition, int64(tp.Offset))
					}
				}
			}
		}
		if s.o.Progress != nil && time.Since(lastTell) > 200*time.Millisecond {
			s.o.Progress(s.read1, s.total)
			lastTell = time.Now()
		}
	}
	if s.o.Progress != nil {
		s.o.Progress(s.read1, s.total)
	}
	return nil
}
