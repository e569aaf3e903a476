package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaclient"
)

// The audit's cursor (Options.Cursor): per source partition, the first
// offset not yet judged final, kept as the committed offsets of
// CursorGroup. A run starts at it and ends at the cut; a record still in
// flight (not consumed yet, in a tier, replaying, parked) holds it until
// it settles, or until it is reported stuck. So no record falls between
// two runs, a late run only reads more, and the cursor group's lag is the
// audit's coverage, as any Kafka lag tool shows it.

// inFlight says whether v is not final: the record may still reach an end
// state.
func inFlight(v Verdict) bool {
	switch v {
	case NotConsumed, InTier, InReplay, Parked:
		return true
	}
	return false
}

// cursors reads the cursor group's committed offsets of the source's
// partitions (a partition without one is absent).
func (s *scan) cursors(partitions []int32) (map[int32]int64, error) {
	c, err := kafkaclient.Reader(s.cfg, CursorGroup(s.cfg), kafkaclient.Read{})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	q := make([]kafka.TopicPartition, len(partitions))
	for i, p := range partitions {
		q[i] = kafka.TopicPartition{Topic: &s.source, Partition: p}
	}
	res, err := c.Committed(q, s.timeout)
	return takeCursors(res, err, CursorGroup(s.cfg))
}

// takeCursors keeps the cursor from Committed's answer; any error is one.
func takeCursors(res []kafka.TopicPartition, err error, group string) (map[int32]int64, error) {
	if err != nil {
		return nil, fmt.Errorf("the audit's cursor (group %s): %w", group, err)
	}
	out := map[int32]int64{}
	for _, tp := range res {
		if tp.Error != nil {
			return nil, fmt.Errorf("the audit's cursor of %s[%d] (group %s): %w", *tp.Topic, tp.Partition, group, tp.Error)
		}
		if tp.Offset >= 0 {
			out[tp.Partition] = int64(tp.Offset)
		}
	}
	return out, nil
}

// moves are the cursors a completed run commits: each audited
// partition's that moved on, never one back or in place.
func (s *scan) moves() []kafka.TopicPartition {
	var q []kafka.TopicPartition
	for _, p := range slices.Sorted(maps.Keys(s.parts)) {
		if pt := s.parts[p]; pt.cursor > pt.lo {
			q = append(q, kafka.TopicPartition{Topic: &s.source, Partition: p, Offset: kafka.Offset(pt.cursor)})
		}
	}
	return q
}

// moveCursor commits each audited partition's new cursor (moves).
func (s *scan) moveCursor() error {
	q := s.moves()
	if len(q) == 0 {
		return nil
	}
	c, err := kafkaclient.Reader(s.cfg, CursorGroup(s.cfg), kafkaclient.Read{})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	res, err := c.CommitOffsets(q)
	if err == nil {
		for _, tp := range res {
			if tp.Error != nil {
				err = fmt.Errorf("%s[%d]: %w", *tp.Topic, tp.Partition, tp.Error)
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("the audit judged its window but could not move its cursor (group %s; the next run judges the same records again): %w", CursorGroup(s.cfg), err)
	}
	return nil
}

// unjudgedSince counts, with --cursor, the records of the batch's windows
// not judged final, and reads the source timestamp of the first of each
// partition's (the record at its cursor, present: only a committed source
// record is in flight).
func (s *scan) unjudgedSince(ctx context.Context) error {
	from, ends := map[int32]kafka.Offset{}, map[int32]int64{}
	for p, pt := range s.batch {
		if pt.cursor < pt.hi {
			from[p], ends[p] = kafka.Offset(pt.cursor), pt.cursor+1
		}
	}
	seen := map[int32]bool{}
	err := s.readTopic(ctx, s.source, from, ends, func(m *kafka.Message) {
		pt := s.batch[m.TopicPartition.Partition]
		if int64(m.TopicPartition.Offset) == pt.cursor && !seen[pt.p] {
			seen[pt.p] = true
			s.rep.unjudged(pt.hi-pt.cursor, m.Timestamp)
		}
	})
	if err != nil {
		return fmt.Errorf("the first record not judged final: %w", err)
	}
	for p := range from {
		if !seen[p] {
			pt := s.batch[p]
			return fmt.Errorf("%s[%d]: the record at the cursor, %d, judged in flight, was not read again", s.source, p, pt.cursor)
		}
	}
	return nil
}

// cursorDone ends the report of a --cursor run: with no record left
// unjudged, everything before the cut (taken at the run's time) was.
func (s *scan) cursorDone() {
	if s.rep.OldestUnjudged == nil {
		at := s.o.Now.UTC().Truncate(time.Second)
		s.rep.OldestUnjudged = &at
	}
}
