package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/kafkaclient"
	"relay/internal/ledger"
)

// Options say what to audit.
type Options struct {
	Source string
	// The window: by time (zero: unbounded) or by offsets per partition
	// (nil: unbounded; a partition not named is unbounded). From is
	// inclusive, To exclusive.
	FromTime, ToTime       time.Time
	FromOffsets, ToOffsets map[int32]int64
	// Partition limits the audit to one source partition; -1: all.
	Partition int32
	// MaxFindings is how many findings the report lists with their
	// coordinates (all are counted).
	MaxFindings int
	// Progress, when set, hears how many records were read of about how
	// many, now and then.
	Progress func(read, total int64)
	// Now is the time of the audit (retention is judged against it).
	Now time.Time
}

// part is the scan's state of one source partition.
type part struct {
	p         int32
	lo, hi    int64 // the window, [lo, hi)
	logStart  int64 // of the source partition
	base      int64 // the window's first offset still in the log: slots[0]
	committed int64 // the group's, at the cut; -1: none
	slots     []slot
	// ts is, per offset, the source record's timestamp (ms), kept only
	// when an end-state topic lost records to time retention.
	ts []int64
}

// derived is one topic relay writes for the source, and its role.
type derived struct {
	topic string
	role  role
}

type role int

const (
	roleOutput role = iota
	roleRejected
	roleQuarantine
	roleTier
	roleReplay
	// The state topic, shared by the group's sources: each failure's
	// ledger changes are in its source partition's.
	roleLedger
)

// bound is how long reading one topic to its end may take.
const bound = 10 * time.Minute

// Run audits o.Source as relay, configured by cfg, writes it; a is an
// admin client of the same cluster.
func Run(ctx context.Context, cfg *config.Config, a *kafka.AdminClient, o *Options) (*Report, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	timeout := int(max(cfg.OpTimeout, 10*time.Second) / time.Millisecond)
	md, err := a.GetMetadata(nil, true, timeout)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	src, ok := md.Topics[o.Source]
	if !ok || src.Error.Code() != kafka.ErrNoError || len(src.Partitions) == 0 {
		return nil, &InputError{fmt.Errorf("source topic %q: not found", o.Source)}
	}
	if !slices.Contains(cfg.SourceTopics, o.Source) {
		return nil, &InputError{fmt.Errorf("%q is not one of RELAY_SOURCE_TOPICS (%s): relay's topics for it cannot be named", o.Source, strings.Join(cfg.SourceTopics, ","))}
	}
	names := cfg.Derived(o.Source)
	topics := []derived{{names.Output, roleOutput}, {names.Rejected, roleRejected}, {names.Quarantine, roleQuarantine}}
	if !cfg.WaitsInPlace() {
		for _, t := range tierTopics(cfg, o.Source, md) {
			topics = append(topics, derived{t, roleTier})
		}
	}
	topics = append(topics, derived{names.Replay, roleReplay}, derived{names.State, roleLedger})
	var missing []string
	for _, d := range topics[:3] {
		if t, ok := md.Topics[d.topic]; !ok || len(t.Partitions) == 0 {
			missing = append(missing, d.topic)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("relay's topics for %s are missing: %s (relay topics apply creates them)", o.Source, strings.Join(missing, ", "))
	}
	s := &scan{cfg: cfg, o: o, source: o.Source, timeout: timeout, topics: topics, md: md, rep: newReport(o, cfg)}
	if err := s.window(len(src.Partitions)); err != nil {
		return nil, err
	}
	if err := s.cut(); err != nil {
		return nil, err
	}
	s.retention(ctx, a)
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	s.judge()
	return s.rep, nil
}

// InputError is a bad request: the command line names something that is
// not there (exit 2).
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// tierTopics are the source's tier topics in the metadata: today's, and
// retired ones (an earlier RELAY_RETRY_TIERS), which may still hold
// records relay reads.
func tierTopics(cfg *config.Config, source string, md *kafka.Metadata) []string {
	pat := cfg.TierTopicPattern(source)
	var out []string
	for name := range md.Topics {
		if matches(pat, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// matches says whether name is parts joined by non-empty delays.
func matches(parts []string, name string) bool {
	if len(parts) < 2 || !strings.HasPrefix(name, parts[0]) {
		return false
	}
	rest := name[len(parts[0]):]
	for _, p := range parts[1:] {
		i := strings.Index(rest, p)
		if p == "" {
			i = len(rest)
		}
		if i <= 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return rest == ""
}

type scan struct {
	cfg     *config.Config
	o       *Options
	source  string
	timeout int
	topics  []derived
	md      *kafka.Metadata
	parts   map[int32]*part
	// committed are the group's offsets at the cut, per tier and replay
	// partition; ends are where each read stops.
	committed map[string]map[int32]int64
	ends      map[string]map[int32]int64
	lows      map[string]map[int32]int64
	// An end-state record of a source record may have been deleted:
	// whatever its time (deletedAll), or when its timestamp is before
	// deletedBefore (ms; 0: none).
	deletedAll    bool
	deletedBefore int64
	rep           *Report
	read1         int64
	total         int64
}

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
	for _, pt := range s.parts {
		pt.hi = max(pt.hi, pt.lo)
		pt.base = max(pt.lo, pt.logStart)
		n := pt.hi - pt.base
		if n > maxWindow {
			return &InputError{fmt.Errorf("%s[%d]: the window holds %d offsets, more than the %d one audit takes; narrow it with --from/--to or --partition", s.source, pt.p, n, int64(maxWindow))}
		}
		pt.slots = make([]slot, max(n, 0))
	}
	return nil
}

// maxWindow bounds the offsets of one partition's window (8 bytes each).
const maxWindow = 1 << 28

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
			s.parts[tp.Partition].committed = off
			continue
		}
		if s.committed[*tp.Topic] == nil {
			s.committed[*tp.Topic] = map[int32]int64{}
		}
		s.committed[*tp.Topic][tp.Partition] = off
	}
	return s.snapshotEnds()
}

// snapshotEnds fixes where the reading of each derived partition stops.
func (s *scan) snapshotEnds() error {
	probe, err := kafkaclient.Probe(s.cfg)
	if err != nil {
		return err
	}
	defer func() { _ = probe.Close() }()
	s.ends, s.lows = map[string]map[int32]int64{}, map[string]map[int32]int64{}
	for _, d := range s.topics {
		s.ends[d.topic], s.lows[d.topic] = map[int32]int64{}, map[int32]int64{}
		n := int32(len(s.md.Topics[d.topic].Partitions)) //nolint:gosec // a partition count
		for p := range s.parts {
			if p >= n {
				continue // partitions not (yet) added there: nothing written
			}
			low, high, err := probe.QueryWatermarkOffsets(d.topic, p, s.timeout)
			if err != nil {
				return fmt.Errorf("watermarks of %s[%d]: %w", d.topic, p, err)
			}
			s.ends[d.topic][p], s.lows[d.topic][p] = high, low
			s.total += high - low
		}
	}
	for _, pt := range s.parts {
		s.total += int64(len(pt.slots))
	}
	return nil
}

// retention finds, per end-state topic that lost records (its log starts
// past 0), the time before which its records may have been deleted: time
// retention deletes only records older than retention.ms; size retention,
// compaction and an unknown configuration may have deleted any.
func (s *scan) retention(ctx context.Context, a *kafka.AdminClient) {
	var res []kafka.ConfigResource
	for _, d := range s.topics[:3] {
		res = append(res, kafka.ConfigResource{Type: kafka.ResourceTopic, Name: d.topic})
	}
	c, cancel := context.WithTimeout(ctx, time.Duration(s.timeout)*time.Millisecond)
	defer cancel()
	described, err := a.DescribeConfigs(c, res)
	conf := map[string]map[string]string{}
	if err == nil {
		for _, r := range described {
			conf[r.Name] = map[string]string{}
			for k, e := range r.Config {
				conf[r.Name][k] = e.Value
			}
		}
	}
	for _, d := range s.topics[:3] {
		kv, known := conf[d.topic]
		if known && strings.Contains(kv["cleanup.policy"], "compact") {
			s.deletedAll = true
			s.rep.Trimmed = append(s.rep.Trimmed, d.topic+": compacted")
			continue
		}
		trimmed := false
		for _, low := range s.lows[d.topic] {
			trimmed = trimmed || low > 0
		}
		if !trimmed {
			continue
		}
		ms, err := strconv.ParseInt(kv["retention.ms"], 10, 64)
		bytes, _ := strconv.ParseInt(kv["retention.bytes"], 10, 64)
		if !known || err != nil || ms < 0 || bytes >= 0 {
			s.deletedAll = true
			s.rep.Trimmed = append(s.rep.Trimmed, d.topic+": records deleted (by size, or retention unknown)")
			continue
		}
		s.deletedBefore = max(s.deletedBefore, s.o.Now.Add(-time.Duration(ms)*time.Millisecond).UnixMilli())
		s.rep.Trimmed = append(s.rep.Trimmed, fmt.Sprintf("%s: records older than retention.ms (%s) deleted", d.topic, time.Duration(ms)*time.Millisecond))
	}
	if s.deletedBefore > 0 && !s.deletedAll {
		for _, pt := range s.parts {
			pt.ts = make([]int64, len(pt.slots))
		}
	}
}

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

// at is the slot of source offset off of partition p, or nil outside the
// window.
func (s *scan) at(p int32, off int64) (*part, *slot) {
	pt := s.parts[p]
	if pt == nil {
		return nil, nil
	}
	i := off - pt.base
	if i < 0 || i >= int64(len(pt.slots)) {
		return pt, nil
	}
	return pt, &pt.slots[i]
}

func (s *scan) sourceRecord(m *kafka.Message) {
	pt, sl := s.at(m.TopicPartition.Partition, int64(m.TopicPartition.Offset))
	if sl == nil {
		return
	}
	*sl |= present
	if pt.ts != nil {
		pt.ts[int64(m.TopicPartition.Offset)-pt.base] = m.Timestamp.UnixMilli()
	}
}

// coordOf is where a derived record is.
func coordOf(m *kafka.Message) Coord {
	return Coord{Topic: *m.TopicPartition.Topic, Partition: m.TopicPartition.Partition, Offset: int64(m.TopicPartition.Offset)}
}

func (s *scan) outputRecord(m *kafka.Message) {
	id, ok := envelope.Lookup(m.Headers, envelope.MessageID)
	if !ok {
		s.misrouted(m, "no relay.message.id: not written by relay")
		return
	}
	topic, p, off, err := parseID(string(id))
	if err != nil {
		s.misrouted(m, err.Error())
		return
	}
	s.derivedOf(m, topic, p, off, func(sl *slot) {
		sl.add(outShift)
		if sl.count(outShift) == 2 {
			s.note(KindDuplicated, &Coord{Topic: topic, Partition: p, Offset: off}, coordOf(m), "a second output with this relay.message.id (the first is earlier in its partition)")
		}
	})
}

// envelopeRecord reads a rejected, quarantine, tier or replay record's
// source from its envelope.
func (s *scan) envelopeRecord(d derived) func(*kafka.Message) {
	return func(m *kafka.Message) {
		topic, tok := envelope.Lookup(m.Headers, envelope.SourceTopic)
		ps, pok := envelope.Lookup(m.Headers, envelope.SourcePartition)
		os, ook := envelope.Lookup(m.Headers, envelope.SourceOffset)
		if !tok || !pok || !ook {
			s.misrouted(m, "no relay.source.* headers: not written by relay")
			return
		}
		p, perr := strconv.ParseInt(string(ps), 10, 32)
		off, oerr := strconv.ParseInt(string(os), 10, 64)
		if perr != nil || oerr != nil {
			s.misrouted(m, "unreadable relay.source.partition or relay.source.offset")
			return
		}
		s.derivedOf(m, string(topic), int32(p), off, func(sl *slot) {
			switch d.role {
			case roleRejected:
				sl.add(rejShift)
			case roleQuarantine:
				sl.add(quarShift)
			case roleTier, roleReplay:
				c, ok := s.committed[d.topic][m.TopicPartition.Partition]
				if ok && int64(m.TopicPartition.Offset) >= c {
					if d.role == roleTier {
						*sl |= tierFlight
					} else {
						*sl |= replFlight
					}
				}
			}
		})
	}
}

// derivedOf applies a derived record naming source topic/p/off: one in
// another source's topics, or in a partition other than its source's, is
// misrouted.
func (s *scan) derivedOf(m *kafka.Message, topic string, p int32, off int64, apply func(*slot)) {
	switch {
	case topic != s.source:
		s.misrouted(m, fmt.Sprintf("names source %s/%d/%d, not of %s", topic, p, off, s.source))
		return
	case p != m.TopicPartition.Partition:
		s.misrouted(m, fmt.Sprintf("names source partition %d, but relay writes a record to its source's partition number", p))
		return
	}
	if _, sl := s.at(p, off); sl != nil {
		apply(sl)
	}
}

func (s *scan) misrouted(m *kafka.Message, why string) {
	s.rep.Misrouted++
	s.note(KindMisrouted, nil, coordOf(m), why)
}

func (s *scan) ledgerRecord(m *kafka.Message) {
	e, ok, err := ledger.Decode(string(m.Key), m.Value)
	if !ok || err != nil || e.Outcome == ledger.OutcomeDuplicate || e.Source.Topic != s.source {
		return
	}
	if _, sl := s.at(e.Source.Partition, e.Source.Offset); sl != nil {
		sl.ledgered(e.State, e.ReplayCount)
	}
}

// parseID splits a relay.message.id, topic/partition/offset; topic names
// cannot hold a slash.
func parseID(id string) (topic string, p int32, off int64, err error) {
	i := strings.LastIndexByte(id, '/')
	j := -1
	if i > 0 {
		j = strings.LastIndexByte(id[:i], '/')
	}
	if j <= 0 {
		return "", 0, 0, fmt.Errorf("relay.message.id %q is not topic/partition/offset", id)
	}
	pp, perr := strconv.ParseInt(id[j+1:i], 10, 32)
	o, oerr := strconv.ParseInt(id[i+1:], 10, 64)
	if perr != nil || oerr != nil {
		return "", 0, 0, errors.New("relay.message.id " + strconv.Quote(id) + " is not topic/partition/offset")
	}
	return id[:j], int32(pp), o, nil
}

// judge gives every offset of the window its verdict.
func (s *scan) judge() {
	ps := make([]int32, 0, len(s.parts))
	for p := range s.parts {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	none := true
	for _, pt := range s.parts {
		none = none && pt.committed < 0
	}
	if none {
		s.rep.Notes = append(s.rep.Notes, fmt.Sprintf("group %s has committed no offset of %s: every record counts as not consumed (is RELAY_GROUP_ID relay's?)", s.cfg.GroupID, s.source))
	}
	for _, p := range ps {
		pt := s.parts[p]
		pr := s.rep.partition(pt)
		for i, sl := range pt.slots {
			off := pt.base + int64(i)
			consumed := pt.committed >= 0 && off < pt.committed
			deleted := s.deletedAll || (pt.ts != nil && pt.ts[i] < s.deletedBefore)
			v, why := judge(sl, consumed, deleted)
			pr.count(v, sl.state())
			if k := kindOf(v); k != "" {
				if v == Duplicated && sl.count(outShift) > 1 {
					continue // noted, with the copy's coordinates, when read
				}
				s.note(k, &Coord{Topic: s.source, Partition: p, Offset: off}, Coord{}, why)
			}
		}
		if pt.lo < pt.logStart {
			n := min(pt.logStart, pt.hi) - pt.lo
			pr.Unverifiable += n
			s.note(KindUnverifiable, &Coord{Topic: s.source, Partition: p, Offset: pt.lo}, Coord{},
				fmt.Sprintf("%d source records, offsets %d to %d, were deleted by retention before the audit: nothing can be said of them", n, pt.lo, pt.lo+n-1))
		}
	}
	s.rep.finish()
}

// note counts a finding, and keeps it with its coordinates while there
// is room.
func (s *scan) note(k Kind, src *Coord, at Coord, why string) {
	s.rep.note(k, src, at, why, s.o.MaxFindings)
}
