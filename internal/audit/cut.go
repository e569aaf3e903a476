package audit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/kafkaclient"
	"relay/internal/keyorder"
)

// cut reads the group's committed offsets — source, tier and replay
// partitions — and then the end of every partition the audit reads. What
// a committed offset stands for was written in the transaction that
// committed it, before those ends.
func (s *scan) cut() error {
	c, err := kafkaclient.Reader(s.cfg, s.cfg.GroupID, kafkaclient.Read{})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	var q []kafka.TopicPartition
	for p := range s.parts {
		q = append(q, kafka.TopicPartition{Topic: &s.source, Partition: p})
		for _, d := range s.topics {
			if d.role == roleTier || d.role == roleReplay {
				t := d.topic
				if p < int32(len(s.md.Topics[t].Partitions)) { //nolint:gosec // a partition count
					q = append(q, kafka.TopicPartition{Topic: &t, Partition: p})
				}
			}
		}
	}
	// Committed asks for stable offsets (read_committed): an offset
	// commit in an open transaction is waited for, not skipped.
	res, err := c.Committed(q, s.timeout)
	if err := s.takeCommitted(res, err); err != nil {
		return err
	}
	return s.snapshotEnds()
}

// takeCommitted keeps the group's committed offsets as Committed answered
// them (res, err): the source's, with their parked sets, and the tiers'
// and the replay topic's. Any error, the whole answer's or a partition's,
// is no verdict: an offset read as "nothing committed" would judge every
// record of its partition not consumed, or every copy in flight.
func (s *scan) takeCommitted(res []kafka.TopicPartition, err error) error {
	if err != nil {
		return fmt.Errorf("the group's committed offsets (%s): %w", s.cfg.GroupID, err)
	}
	s.committed = map[string]map[int32]int64{}
	for _, tp := range res {
		if tp.Error != nil {
			return fmt.Errorf("committed offset of %s[%d]: %w", *tp.Topic, tp.Partition, tp.Error)
		}
		off := int64(tp.Offset)
		if off < 0 {
			off = -1
		}
		if *tp.Topic == s.source {
			pt := s.parts[tp.Partition]
			pt.committed = off
			if tp.Metadata != nil && off >= 0 {
				parked, ok, err := keyorder.Decode(off, *tp.Metadata)
				if err != nil {
					return fmt.Errorf("committed offset of %s[%d]: %w", *tp.Topic, tp.Partition, err)
				}
				if ok {
					pt.parked = parked
				}
			}
			continue
		}
		if s.committed[*tp.Topic] == nil {
			s.committed[*tp.Topic] = map[int32]int64{}
		}
		s.committed[*tp.Topic][tp.Partition] = off
	}
	return nil
}

// snapshotEnds fixes where the reading of each derived partition stops:
// the ledger's first, then the others'. relay writes a ledger change in
// the transaction that writes the records it speaks of (a quarantine
// record, a replay copy, a replay's output), so whatever the ledger's
// snapshot holds, the later snapshots of the other topics hold too: a
// ledger entry without its record is a finding, never the snapshot's
// order.
func (s *scan) snapshotEnds() error {
	probe, err := kafkaclient.Probe(s.cfg)
	if err != nil {
		return err
	}
	defer func() { _ = probe.Close() }()
	return s.readEnds(probe)
}

// watermarker is what snapshotEnds needs of a client.
type watermarker interface {
	QueryWatermarkOffsets(topic string, partition int32, timeoutMs int) (low, high int64, err error)
}

// readEnds asks w for the watermarks of every derived partition, the
// ledger's first.
func (s *scan) readEnds(w watermarker) error {
	s.ends, s.lows = map[string]map[int32]int64{}, map[string]map[int32]int64{}
	order := slices.Clone(s.topics)
	slices.SortStableFunc(order, func(a, b derived) int {
		return cmp.Compare(boolInt(a.role != roleLedger), boolInt(b.role != roleLedger))
	})
	for _, d := range order {
		s.ends[d.topic], s.lows[d.topic] = map[int32]int64{}, map[int32]int64{}
		n := int32(len(s.md.Topics[d.topic].Partitions)) //nolint:gosec // a partition count
		for p := range s.parts {
			if p >= n {
				continue // partitions not (yet) added there: nothing written
			}
			low, high, err := w.QueryWatermarkOffsets(d.topic, p, s.timeout)
			if err != nil {
				return fmt.Errorf("watermarks of %s[%d]: %w", d.topic, p, err)
			}
			s.ends[d.topic][p], s.lows[d.topic][p] = high, low
			s.total += high - low
		}
	}
	for _, pt := range s.parts {
		s.total += max(pt.hi-pt.base, 0)
	}
	return nil
}

// configDescriber is what retention needs of an admin client.
type configDescriber interface {
	DescribeConfigs(ctx context.Context, resources []kafka.ConfigResource, options ...kafka.DescribeConfigsAdminOption) ([]kafka.ConfigResourceResult, error)
}

// retention reads the cleanup.policy of the source and of each end-state
// topic, and marks the end-state partitions that lost records (their log
// starts past 0: time or size retention, DeleteRecords). A compacted topic
// may have lost any record wherever its log starts. A configuration the
// audit cannot read stops it: it is never taken for a deletion, nor for
// none.
func (s *scan) retention(ctx context.Context, a configDescriber) error {
	names := []string{s.source}
	for _, d := range s.topics[:3] {
		names = append(names, d.topic)
	}
	res := make([]kafka.ConfigResource, len(names))
	for i, n := range names {
		res[i] = kafka.ConfigResource{Type: kafka.ResourceTopic, Name: n}
	}
	c, cancel := context.WithTimeout(ctx, time.Duration(s.timeout)*time.Millisecond)
	defer cancel()
	described, err := a.DescribeConfigs(c, res)
	if err != nil {
		return fmt.Errorf("the configuration of %s: %w", strings.Join(names, ", "), err)
	}
	policy := map[string]string{}
	for _, r := range described {
		if r.Error.Code() != kafka.ErrNoError {
			return fmt.Errorf("the configuration of topic %s: %w (the audit needs DescribeConfigs on it to tell a deleted record from a lost one; relay topics acls audit lists it)", r.Name, r.Error)
		}
		e, ok := r.Config["cleanup.policy"]
		if !ok {
			return fmt.Errorf("the configuration of topic %s has no cleanup.policy", r.Name)
		}
		policy[r.Name] = e.Value
	}
	for _, n := range names {
		if _, ok := policy[n]; !ok {
			return fmt.Errorf("the configuration of topic %s: not in the brokers' answer", n)
		}
	}
	if strings.Contains(policy[s.source], "compact") {
		s.sourceCompacted = true
		s.rep.Trimmed = append(s.rep.Trimmed, s.source+": compacted: an offset without a record may have lost it")
	}
	s.trims = map[string]map[int32]*trim{}
	for _, d := range s.topics[:3] {
		if strings.Contains(policy[d.topic], "compact") {
			// Any end state may be gone from it, at any offset: every
			// record without one would be unverifiable, a loss
			// included, and the audit clean. No verdict instead.
			return fmt.Errorf("%s is compacted (cleanup.policy %s): compaction may remove any end state in it, so no record without one can be told lost; relay's end-state topics must delete, not compact (relay topics apply creates them so)", d.topic, policy[d.topic])
		}
		for p, low := range s.lows[d.topic] {
			if low > 0 {
				if s.trims[d.topic] == nil {
					s.trims[d.topic] = map[int32]*trim{}
				}
				s.trims[d.topic][p] = &trim{logStart: low}
			}
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
