package statetopic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaclient"
	"relay/internal/kafkaerr"
)

// ReadToEnd reads partitions of topic from their start to the end they had
// when it was called, committed records only, and calls each for every
// record. The end is the high watermark, not the last stable offset: a
// transaction still open (an instance that died in it, a command that
// still commits) is waited for until it is committed or aborted, so what
// was written before the call is seen. It returns those ends, by
// partition: a reader that follows on from there misses nothing. group
// only names the reader: it is assigned, never subscribed, and commits
// nothing. Reaching no end within bound is an error.
func ReadToEnd(ctx context.Context, cfg *config.Config, group, topic string, partitions []int32, bound time.Duration,
	each func(*kafka.Message)) (ends map[int32]int64, err error) {
	from := make(map[int32]kafka.Offset, len(partitions))
	for _, p := range partitions {
		from[p] = kafka.OffsetBeginning
	}
	return ReadFrom(ctx, cfg, group, topic, from, bound, each)
}

// ReadFrom is ReadToEnd from the offsets in from (kafka.OffsetBeginning
// for a partition's start) instead of from the start.
func ReadFrom(ctx context.Context, cfg *config.Config, group, topic string, from map[int32]kafka.Offset, bound time.Duration,
	each func(*kafka.Message)) (ends map[int32]int64, err error) {
	partitions := make([]int32, 0, len(from))
	for p := range from {
		partitions = append(partitions, p)
	}
	c, err := kafkaclient.Reader(cfg, group, kafkaclient.Read{EOF: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	if ends, err = HighWatermarks(cfg, topic, partitions); err != nil {
		return nil, err
	}
	r := reading{c: c, topic: topic, end: map[int32]int64{}}
	for _, p := range partitions {
		if high := ends[p]; high > 0 && (from[p] < 0 || int64(from[p]) < high) {
			r.end[p] = high
			r.tps = append(r.tps, kafka.TopicPartition{Topic: &topic, Partition: p, Offset: from[p]})
		}
	}
	if len(r.tps) == 0 {
		return ends, nil
	}
	if err := c.Assign(r.tps); err != nil {
		return nil, err
	}
	if err := r.untilEnds(ctx, bound, each); err != nil {
		return nil, fmt.Errorf("%s %v: %w", topic, partitions, err)
	}
	return ends, nil
}

// reading is one ReadFrom: the partitions it reads and the ends it waits
// for.
type reading struct {
	c     *kafka.Consumer
	topic string
	tps   []kafka.TopicPartition
	end   map[int32]int64 // partitions whose end is not reached yet
}

func (r *reading) reached(p int32, next int64) {
	if want, ok := r.end[p]; ok && next >= want {
		delete(r.end, p)
	}
}

// untilEnds polls until every partition reached its end.
func (r *reading) untilEnds(ctx context.Context, bound time.Duration, each func(*kafka.Message)) error {
	deadline := time.Now().Add(bound)
	for ctx.Err() == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("end not reached within %s (a transaction still open?)", bound)
		}
		switch ev := r.c.Poll(200).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				return ev.TopicPartition.Error
			}
			each(ev)
			r.reached(ev.TopicPartition.Partition, int64(ev.TopicPartition.Offset)+1)
		case kafka.PartitionEOF:
			r.reached(ev.Partition, int64(ev.Offset))
		case kafka.Error:
			if ev.IsFatal() {
				return ev
			}
		case nil:
			// Aborted records and transaction markers move the
			// position without a message or a new EOF.
			if pos, err := r.c.Position(r.tps); err == nil {
				for _, tp := range pos {
					if tp.Offset >= 0 {
						r.reached(tp.Partition, int64(tp.Offset))
					}
				}
			}
		}
		if len(r.end) == 0 {
			return nil
		}
	}
	return errors.Join(ctx.Err(), errors.New("reading interrupted"))
}

// HighWatermarks asks for the partitions' high watermarks. The probe reads
// uncommitted: a read_committed client is told the last stable offset,
// which stops at the first open transaction.
func HighWatermarks(cfg *config.Config, topic string, partitions []int32) (map[int32]int64, error) {
	_, high, err := Watermarks(cfg, topic, partitions)
	return high, err
}

// Watermarks asks for the partitions' low and high watermarks, as
// HighWatermarks does: where retention has deleted up to, and the end.
func Watermarks(cfg *config.Config, topic string, partitions []int32) (low, high map[int32]int64, err error) {
	probe, err := kafkaclient.Probe(cfg)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = probe.Close() }()
	timeout := int(max(cfg.OpTimeout, 10*time.Second) / time.Millisecond)
	low, high = map[int32]int64{}, map[int32]int64{}
	for _, p := range partitions {
		lo, hi, err := probe.QueryWatermarkOffsets(topic, p, timeout)
		if kafkaerr.Is(err, kafka.ErrUnknownPartition) && !hasPartition(probe, topic, p, timeout) {
			// Partitions were added to a source and not (yet) to this
			// topic: nothing can have been written there. Records that
			// would be are held back until the topic has the partition.
			low[p], high[p] = 0, 0
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("end of %s[%d]: %w", topic, p, err)
		}
		low[p], high[p] = lo, hi
	}
	return low, high, nil
}

// hasPartition asks the broker, with a fresh metadata request, whether
// topic has partition p. When it cannot tell, it says yes: the caller then
// keeps its error and retries, rather than take state for empty.
func hasPartition(c *kafka.Consumer, topic string, p int32, timeoutMs int) bool {
	md, err := c.GetMetadata(&topic, false, timeoutMs)
	if err != nil {
		return true
	}
	t, ok := md.Topics[topic]
	if !ok || t.Error.Code() != kafka.ErrNoError {
		return true
	}
	return int(p) < len(t.Partitions)
}

// Partitions lists 0..n-1.
func Partitions(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}
