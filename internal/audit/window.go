package audit

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaclient"
)

// window fixes each partition's [lo, hi).
func (s *scan) window(n int) error {
	probe, err := kafkaclient.Probe(s.cfg)
	if err != nil {
		return err
	}
	defer func() { _ = probe.Close() }()
	s.parts = map[int32]*part{}
	for p := range int32(n) { //nolint:gosec // a partition count
		if s.o.Partition >= 0 && p != s.o.Partition {
			continue
		}
		low, high, err := probe.QueryWatermarkOffsets(s.source, p, s.timeout)
		if err != nil {
			return fmt.Errorf("watermarks of %s[%d]: %w", s.source, p, err)
		}
		pt := &part{p: p, lo: low, hi: high, logStart: low, committed: -1}
		if v, ok := s.o.FromOffsets[p]; ok {
			pt.lo = v
		}
		if v, ok := s.o.ToOffsets[p]; ok {
			pt.hi = min(v, high)
		}
		s.parts[p] = pt
	}
	if s.o.Partition >= 0 && len(s.parts) == 0 {
		return &InputError{fmt.Errorf("--partition %d: %s has %d partitions", s.o.Partition, s.source, n)}
	}
	if !s.o.FromTime.IsZero() || !s.o.ToTime.IsZero() {
		if err := s.byTime(probe); err != nil {
			return err
		}
	}
	if s.o.Cursor {
		// After --from, which starts only a partition without a cursor.
		cur, err := s.cursors(slices.Sorted(maps.Keys(s.parts)))
		if err != nil {
			return err
		}
		for p, c := range cur {
			s.parts[p].lo = c // below the log's start, what was trimmed is unverifiable
		}
	}
	for _, pt := range s.parts {
		if err := pt.bound(s.source); err != nil {
			return err
		}
	}
	return nil
}

// bound settles the window [lo, hi) and the offsets read in it, [base,
// hi): those from the log's start on. A window that ends below the log's
// start reads nothing (base is hi); every offset of it is unverifiable.
func (pt *part) bound(source string) error {
	pt.hi = max(pt.hi, pt.lo)
	pt.base = min(max(pt.lo, pt.logStart), pt.hi)
	if n := pt.hi - pt.base; n > maxWindow {
		return &InputError{fmt.Errorf("%s[%d]: the window holds %d offsets, more than the %d one audit takes; narrow it with --from/--to or --partition", source, pt.p, n, int64(maxWindow))}
	}
	return nil
}

// maxWindow bounds the offsets of one partition's window.
const maxWindow = 1 << 40

// byTime turns --from and --to into offsets, per partition.
func (s *scan) byTime(c *kafka.Consumer) error {
	ask := func(t time.Time) (map[int32]int64, error) {
		var q []kafka.TopicPartition
		for p := range s.parts {
			q = append(q, kafka.TopicPartition{Topic: &s.source, Partition: p, Offset: kafka.Offset(t.UnixMilli())})
		}
		res, err := c.OffsetsForTimes(q, s.timeout)
		if err != nil {
			return nil, fmt.Errorf("offsets of %s at %s: %w", s.source, t.Format(time.RFC3339), err)
		}
		out := map[int32]int64{}
		for _, tp := range res {
			if tp.Error != nil {
				return nil, tp.Error
			}
			out[tp.Partition] = int64(tp.Offset) // -1: no record at or after t
		}
		return out, nil
	}
	if !s.o.FromTime.IsZero() {
		from, err := ask(s.o.FromTime)
		if err != nil {
			return err
		}
		for p, off := range from {
			if off < 0 {
				off = s.parts[p].hi
			}
			s.parts[p].lo = off
		}
	}
	if !s.o.ToTime.IsZero() {
		to, err := ask(s.o.ToTime)
		if err != nil {
			return err
		}
		for p, off := range to {
			if off >= 0 {
				s.parts[p].hi = min(s.parts[p].hi, off)
			}
		}
	}
	return nil
}
