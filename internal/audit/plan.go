package audit

import (
	"context"
	"fmt"
	"os"
	"relay/internal/keyorder"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/ledger"
	"relay/internal/topics"
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
	// Now is the time of the audit (a copy's age is judged against it).
	Now time.Time
	// StuckAfter is how long past its due time a copy in flight may wait
	// before it is reported stuck; zero: the retry budget
	// (RELAY_RETRY_MAX_ELAPSED) plus the longest tier delay.
	StuckAfter time.Duration
	// MaxMemory bounds the per-offset state held at once (bytes; zero:
	// DefaultMaxMemory): partitions are audited in batches that fit it.
	MaxMemory int64
	// AllowUnprinted credits a derived record without
	// relay.source.fingerprint (written by a relay older than them) to
	// the source offset it names; else it is misrouted.
	AllowUnprinted bool
	// ReadTimeout bounds the reading of one topic to its end at the cut;
	// zero: DefaultReadTimeout.
	ReadTimeout time.Duration
	// Cursor: the window starts, per partition, at the audit's cursor —
	// the committed offsets of the group CursorGroup names, the first
	// offset not yet judged final — and ends at the cut; a completed
	// audit moves the cursor past every record that reached an end state
	// (or was reported stuck). No record falls between two runs.
	Cursor bool
}

// CursorGroup is the consumer group whose committed offsets are relay
// audit's cursor for cfg's group.
func CursorGroup(cfg *config.Config) string { return cfg.GroupID + ".audit" }

// DefaultStuckAfter is the stuck bound for cfg: the retry budget plus the
// longest tier delay (without a budget, every attempt at the longest
// delay), and never under a minute.
func DefaultStuckAfter(cfg *config.Config) time.Duration {
	var longest time.Duration
	for _, t := range cfg.RetryTiers {
		longest = max(longest, t.Delay)
	}
	budget := cfg.RetryMaxElapsed
	if budget <= 0 {
		budget = time.Duration(cfg.RetryMaxAttempts) * longest
	}
	return max(budget+longest, time.Minute)
}

// part is the scan's state of one source partition.
type part struct {
	p      int32
	lo, hi int64 // the window, [lo, hi)
	// cursor is, once judged, the first offset of the window not judged
	// final (hi: none).
	cursor    int64
	logStart  int64 // of the source partition
	base      int64 // the window's first offset still in the log: slots[0]
	committed int64 // the group's, at the cut; -1: none
	// parked is the commit's parked set (key ordering), if any: the
	// offsets above committed it parks, and those it settled.
	parked keyorder.Parked
	slots  []slot
	fps    []uint16 // per offset, the source record's shortPrint
	// trimBelow: source offsets below it may have lost their end state
	// to deletion in an end-state partition (see trim).
	trimBelow int64
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

// DefaultReadTimeout is how long reading one topic to its end may take.
const DefaultReadTimeout = 10 * time.Minute

// Run audits o.Source as relay, configured by cfg, writes it; a is an
// admin client of the same cluster. A crash of the audit is an error
// (CrashError): no verdict, whose metrics still say the run failed.
func Run(ctx context.Context, cfg *config.Config, a *kafka.AdminClient, o *Options) (*Report, error) {
	return guard(func() (*Report, error) { return runBody(ctx, cfg, a, o) })
}

// runBody is run (a test makes it crash).
var runBody = run

// CrashError is an audit that crashed: a bug in relay, not a verdict.
type CrashError struct {
	Panic any
	Stack []byte
}

func (e *CrashError) Error() string {
	return fmt.Sprintf("the audit crashed, a bug in relay (please report it with this message): %v\n%s", e.Panic, e.Stack)
}

// guard runs f, turning its panic into a *CrashError.
func guard(f func() (*Report, error)) (rep *Report, err error) {
	defer func() {
		if r := recover(); r != nil {
			rep, err = nil, &CrashError{Panic: r, Stack: debug.Stack()}
		}
	}()
	return f()
}

func run(ctx context.Context, cfg *config.Config, a *kafka.AdminClient, o *Options) (*Report, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.MaxMemory <= 0 {
		o.MaxMemory = DefaultMaxMemory
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.StuckAfter <= 0 {
		o.StuckAfter = DefaultStuckAfter(cfg)
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
	reads := []derived{{names.Output, roleOutput}, {names.Rejected, roleRejected}, {names.Quarantine, roleQuarantine}}
	for _, t := range tierTopics(cfg, o.Source, md) {
		reads = append(reads, derived{t, roleTier})
	}
	reads = append(reads, derived{names.Replay, roleReplay}, derived{names.State, roleLedger})
	if missing := missingTopics(cfg, o.Source, md); len(missing) > 0 {
		return nil, fmt.Errorf("relay's topics for %s are missing from the metadata: %s (not created: relay topics apply creates them; or the audit's principal may not Describe them; or RELAY_STATE_TOPIC, RELAY_RETRY_TIERS or the topic names are not relay's): no verdict without them", o.Source, strings.Join(missing, ", "))
	}
	s := &scan{cfg: cfg, o: o, source: o.Source, timeout: timeout, topics: reads, md: md, rep: newReport(o, cfg)}
	if err := s.window(len(src.Partitions)); err != nil {
		return nil, err
	}
	if err := s.cut(); err != nil {
		return nil, err
	}
	if err := s.groupCommitted(); err != nil {
		return nil, err
	}
	if err := s.retention(ctx, a); err != nil {
		return nil, err
	}
	batches, err := s.batches()
	if err != nil {
		return nil, err
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(heapLimit(s.o.MaxMemory)))
	}
	for _, b := range batches {
		if err := s.audit(ctx, b); err != nil {
			return nil, err
		}
		// The batch's state is garbage now: collect it before the next
		// batch allocates its own, so that the two never add up.
		debug.FreeOSMemory()
	}
	s.finish()
	if s.o.Cursor {
		s.cursorDone()
		if err := s.moveCursor(); err != nil {
			return nil, err
		}
	}
	return s.rep, nil
}

// audit reads and judges the partitions of one batch, whose state alone
// is in memory meanwhile.
func (s *scan) audit(ctx context.Context, batch []int32) error {
	s.batch = map[int32]*part{}
	for _, p := range batch {
		pt := s.parts[p]
		n := pt.hi - pt.base
		pt.slots, pt.fps = make([]slot, n), make([]uint16, n)
		s.batch[p] = pt
	}
	defer func() {
		for _, pt := range s.batch {
			pt.slots, pt.fps = nil, nil
		}
		s.batch, s.minTs, s.aheadTs, s.tooManyFailures = nil, 0, false, false
	}()
	if err := s.read(ctx); err != nil {
		return err
	}
	if err := s.unreadableLedger(); err != nil {
		return err
	}
	if err := s.failuresFit(); err != nil {
		return err
	}
	s.foldLedger()
	s.bound()
	s.parkedTooLong()
	s.judge()
	if s.o.Cursor {
		return s.unjudgedSince(ctx)
	}
	return nil
}

// InputError is a bad request: the command line names something that is
// not there (exit 2).
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// missingTopics are relay's topics for source that the metadata does not
// show: the output, rejected, quarantine, replay and state topics, and the
// configured tiers. Each holds end states or the ledger: reading as empty
// one the audit cannot see would call its records lost, or settled.
func missingTopics(cfg *config.Config, source string, md *kafka.Metadata) []string {
	names := cfg.Derived(source)
	want := []string{names.Output, names.Rejected, names.Quarantine, names.Replay, names.State}
	if !cfg.WaitsInPlace() {
		want = append(want, names.Tiers...)
	}
	var missing []string
	for _, topic := range want {
		if t, ok := md.Topics[topic]; !ok || t.Error.Code() != kafka.ErrNoError || len(t.Partitions) == 0 {
			missing = append(missing, topic)
		}
	}
	return missing
}

// groupCommitted is an error when the group has committed no offset of
// any partition of the window while the window holds records: every
// record would count as not consumed, which says nothing (a wrong
// RELAY_GROUP_ID, or a group that has not committed yet). An empty window
// (a source nothing was written to yet, as right after an install) has
// nothing to judge, whatever the group.
func (s *scan) groupCommitted() error {
	empty := true
	for _, pt := range s.parts {
		if pt.committed >= 0 {
			return nil
		}
		empty = empty && pt.hi <= pt.lo
	}
	if empty {
		return nil
	}
	return fmt.Errorf("group %s has committed no offset of %s: is RELAY_GROUP_ID relay's, and has relay committed since it started? no verdict", s.cfg.GroupID, s.source)
}

// tierTopics are the source's tier topics in the metadata: today's (none
// with RELAY_ORDERING=partition), and retired ones (an earlier
// RELAY_RETRY_TIERS or RELAY_ORDERING), which may still hold copies relay
// reads — found as relay run finds them, whatever the ordering, never
// another of relay's topics.
func tierTopics(cfg *config.Config, source string, md *kafka.Metadata) []string {
	var out []string
	if !cfg.WaitsInPlace() {
		for _, t := range cfg.Derived(source).Tiers {
			if _, ok := md.Topics[t]; ok {
				out = append(out, t)
			}
		}
	}
	names := make([]string, 0, len(md.Topics))
	for name := range md.Topics {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, r := range topics.RetiredTiers(cfg, source, names) {
		out = append(out, r.Topic)
	}
	return out
}

type scan struct {
	cfg     *config.Config
	o       *Options
	source  string
	timeout int
	topics  []derived
	md      *kafka.Metadata
	parts   map[int32]*part
	// batch are the partitions being audited, whose state is in memory.
	batch map[int32]*part
	// committed are the group's offsets at the cut, per tier and replay
	// partition; ends are where each read stops.
	committed map[string]map[int32]int64
	ends      map[string]map[int32]int64
	lows      map[string]map[int32]int64
	// sourceCompacted: the source is compacted, and an offset without
	// a committed record may have lost it.
	sourceCompacted bool
	// trims are the end-state partitions that lost records, by topic.
	trims map[string]map[int32]*trim
	// minTs is the oldest timestamp of the window's source records (ms;
	// 0: none read); aheadTs, one of them is ahead of the audit's clock.
	minTs   int64
	aheadTs bool
	// ledger is the state of each failure of the window, by its source
	// offset, folded one change at a time (a few dozen bytes per failure,
	// not per change), until foldLedger.
	ledger map[sourceAt]ledger.Reduced
	// tooManyFailures says the batch's failures passed maxFailures.
	tooManyFailures bool
	// keys are the latest states of the batch's blocked keys with parked
	// records, until parkedTooLong.
	keys map[string]*keyorder.State
	// unprinted counts derived records without relay.source.fingerprint
	// (written before relay kept it): credited on their coordinates alone.
	unprinted int64
	rep       *Report
	read1     int64
	total     int64
	// readers, when set, makes readTopic's consumers (tests).
	readers func() (reader, error)
	// unreadable counts the ledger changes that could not be read, the
	// first few named in unreadableAt.
	unreadable   int
	unreadableAt []string
}
