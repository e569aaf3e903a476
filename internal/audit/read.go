package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaclient"
)

// read reads the source window, then every derived topic and the ledger
// to their ends at the cut: the derived topics from the window's start
// (see derivedStarts), the ledger whole.
func (s *scan) read(ctx context.Context) error {
	from := map[int32]kafka.Offset{}
	ends := map[int32]int64{}
	for p, pt := range s.batch {
		if pt.base < pt.hi {
			from[p], ends[p] = kafka.Offset(pt.base), pt.hi
		}
	}
	if err := s.readTopic(ctx, s.source, from, ends, s.sourceRecord); err != nil {
		return err
	}
	starts, err := s.derivedStarts()
	if err != nil {
		return err
	}
	for _, d := range s.topics {
		from, ends := map[int32]kafka.Offset{}, map[int32]int64{}
		for p, end := range s.ends[d.topic] {
			if s.batch[p] == nil {
				continue
			}
			start := s.lows[d.topic][p]
			if at, ok := starts[d.topic][p]; ok && at > start {
				start = at
				delete(s.trims[d.topic], p) // what it lost is older than the window
			}
			if start < end {
				from[p], ends[p] = kafka.Offset(start), end
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

// reader is what readTopic asks of a consumer (a test gives its own).
type reader interface {
	Assign([]kafka.TopicPartition) error
	Poll(timeoutMs int) kafka.Event
	Position([]kafka.TopicPartition) ([]kafka.TopicPartition, error)
	Close() error
}

// newReader is the read_committed consumer readTopic reads with.
func (s *scan) newReader() (reader, error) {
	if s.readers != nil {
		return s.readers()
	}
	return kafkaclient.Reader(s.cfg, s.cfg.GroupID+".audit", kafkaclient.Read{EOF: true})
}

// readTopic reads topic's partitions from from to ends, read_committed.
func (s *scan) readTopic(ctx context.Context, topic string, from map[int32]kafka.Offset, ends map[int32]int64, each func(*kafka.Message)) error {
	if len(from) == 0 {
		return nil
	}
	c, err := s.newReader()
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
	deadline := time.Now().Add(s.o.ReadTimeout)
	lastTell := time.Now()
	for len(left) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: partitions %s not read to the end they had at the cut within %s (--read-timeout): a transaction still open on them holds read_committed readers back (is a producer stuck mid-transaction?), or the brokers are slow", topic, partitionsLeft(left), s.o.ReadTimeout)
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

// partitionsLeft names the partitions a read did not finish, with the
// end each was read to.
func partitionsLeft(left map[int32]int64) string {
	ps := slices.Sorted(maps.Keys(left))
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = fmt.Sprintf("%d (end %d)", p, left[p])
	}
	return strings.Join(parts, ", ")
}

// startMargin is how much older than the window's oldest source record a
// derived record of it may be: relay gives an output, a rejected and a
// quarantine record the source record's timestamp, and a tier or replay
// copy the time it was written, later; the margin is for the clocks of the
// source's producers and relay's hosts, and the longest tier delay.
func (s *scan) startMargin() time.Duration {
	var longest time.Duration
	for _, t := range s.cfg.RetryTiers {
		longest = max(longest, t.Delay)
	}
	return time.Hour + longest
}

// derivedStarts is where each derived partition's reading starts: the first
// offset whose time index reaches the window's oldest source record's
// timestamp less startMargin (records before it are all older, whatever
// their order), so a daily audit reads a day of records, not the topics'
// whole retention. The ledger is read whole: a failure's history may be
// older than the window. Without source records read, nothing is skipped.
func (s *scan) derivedStarts() (map[string]map[int32]int64, error) {
	out := map[string]map[int32]int64{}
	if s.minTs == 0 || s.aheadTs {
		return out, nil
	}
	at := time.UnixMilli(s.minTs).Add(-s.startMargin())
	probe, err := kafkaclient.Probe(s.cfg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = probe.Close() }()
	for _, d := range s.topics {
		if d.role == roleLedger {
			continue
		}
		var q []kafka.TopicPartition
		for p := range s.ends[d.topic] {
			if s.batch[p] != nil {
				q = append(q, kafka.TopicPartition{Topic: &d.topic, Partition: p, Offset: kafka.Offset(at.UnixMilli())})
			}
		}
		if len(q) == 0 {
			continue
		}
		res, err := probe.OffsetsForTimes(q, s.timeout)
		if err != nil {
			return nil, fmt.Errorf("offsets of %s at %s: %w", d.topic, at.UTC().Format(time.RFC3339), err)
		}
		out[d.topic] = map[int32]int64{}
		for _, tp := range res {
			if tp.Error != nil {
				return nil, fmt.Errorf("offset of %s[%d] at %s: %w", d.topic, tp.Partition, at.UTC().Format(time.RFC3339), tp.Error)
			}
			if tp.Offset >= 0 { // -1: no record at or after it: read to the end from the start
				out[d.topic][tp.Partition] = int64(tp.Offset)
			}
		}
	}
	return out, nil
}
