package quarantine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaclient"
	"relay/internal/ledger"
	"relay/internal/statetopic"
	"relay/internal/topics"
)

// Reader follows the state topic and the quarantine topics into an
// Index: the first CatchUp reads them from their start, each later one
// only what was written since. Its index is never read again whole.
type Reader struct {
	cfg   *config.Config
	admin topics.Admin
	x     *Index
	mu    sync.Mutex // one CatchUp at a time
	next  map[string]map[int32]kafka.Offset
	at    atomic.Int64 // when the last CatchUp began (unix ns); not under mu, which a CatchUp holds
}

// NewReader follows the quarantine of cfg's sources. only, when set, is
// the one failure id to keep: a single failure's read holds nothing else.
func NewReader(cfg *config.Config, a topics.Admin, only string) *Reader {
	x := NewIndex()
	x.only = only
	return &Reader{cfg: cfg, admin: a, x: x, next: map[string]map[int32]kafka.Offset{}}
}

// Index is what the reader has read.
func (r *Reader) Index() *Index { return r.x }

// At is when the last CatchUp began: the index holds every record
// written before it.
func (r *Reader) At() time.Time {
	if at := r.at.Load(); at != 0 {
		return time.Unix(0, at)
	}
	return time.Time{}
}

// CatchUp reads what was written to the topics since the last one, up to
// the ends they have now (committed records only).
func (r *Reader) CatchUp(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer lowerGC()()
	at := time.Now()
	state := r.cfg.StateTopicName()
	n, err := topics.Partitions(r.admin, state, opTimeout(r.cfg))
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("state topic %s does not exist (relay topics apply creates it)", state)
	}
	// The ledger and the quarantine topics are read side by side: the
	// index takes their records in any order (a record before its change,
	// or after).
	for _, t := range append([]string{state}, r.quarantineTopics()...) {
		if r.next[t] == nil {
			r.next[t] = map[int32]kafka.Offset{}
		}
	}
	var wg sync.WaitGroup
	var ledgerErr error
	wg.Go(func() { ledgerErr = r.follow(ctx, state, n, r.x.applyLedger) })
	quarantineErr := r.readQuarantine(ctx)
	wg.Wait()
	if err := errors.Join(ledgerErr, quarantineErr); err != nil {
		return err
	}
	r.x.mu.Lock()
	r.x.sort()
	r.x.mu.Unlock()
	r.at.Store(at.UnixNano())
	return nil
}

func (r *Reader) quarantineTopics() []string {
	out := make([]string, 0, len(r.cfg.SourceTopics))
	for _, src := range r.cfg.SourceTopics {
		out = append(out, r.cfg.Derived(src).Quarantine)
	}
	return out
}

// readQuarantine reads each source's quarantine topic on, with its
// retention and where retention has deleted it up to.
func (r *Reader) readQuarantine(ctx context.Context) error {
	for _, src := range r.cfg.SourceTopics {
		topic := r.cfg.Derived(src).Quarantine
		n, err := topics.Partitions(r.admin, topic, opTimeout(r.cfg))
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		c, cancel := context.WithTimeout(ctx, opTimeout(r.cfg))
		ret, ok, err := topics.Retention(c, r.admin, topic)
		cancel()
		if err == nil {
			r.x.setRetention(topic, ret, ok)
		}
		if err := r.follow(ctx, topic, n, func(m *kafka.Message) { r.x.addRecord(m, topic, src) }); err != nil {
			return err
		}
		// Retention deletes records the index still holds: what starts
		// below a partition's low watermark is gone.
		low, _, err := statetopic.Watermarks(r.cfg, topic, statetopic.Partitions(n))
		if err != nil {
			return err
		}
		lows := make([]int64, n)
		for p, o := range low {
			if int(p) < n {
				lows[p] = o
			}
		}
		r.x.setLow(topic, lows)
	}
	return nil
}

// follow reads topic's n partitions on from where the last read ended.
func (r *Reader) follow(ctx context.Context, topic string, n int, each func(*kafka.Message)) error {
	from := r.next[topic] // made by CatchUp: follow runs beside another
	for p := range int32(n) {
		if _, ok := from[p]; !ok {
			from[p] = kafka.OffsetBeginning
		}
	}
	// Each record moves its partition on: a read that fails half way is
	// taken up where it stopped, and nothing is folded twice.
	ends, err := statetopic.ReadFrom(ctx, r.cfg, r.cfg.ReaderGroup(readerRole), topic, maps.Clone(from), readBound, func(m *kafka.Message) {
		each(m)
		from[m.TopicPartition.Partition] = m.TopicPartition.Offset + 1
	})
	if err != nil {
		return err
	}
	for p, end := range ends {
		if end > 0 && (from[p] < 0 || int64(from[p]) < end) {
			from[p] = kafka.Offset(end)
		}
	}
	return nil
}

// Full is failure id with its history and its record's bytes, read where
// they are; nil when the index does not hold it. A record that cannot be
// read leaves the failure as the index has it, with the error.
func (r *Reader) Full(ctx context.Context, id string) (*Failure, error) {
	fl := r.x.Get(id)
	if fl == nil {
		return nil, nil
	}
	hist, herr := r.history(ctx, id)
	fl.Entry = &ledger.Entry{ID: id, State: fl.State, Code: fl.Code, Source: fl.Source, Since: fl.Since,
		SchemaVersion: fl.SchemaVersion, ReplayCount: fl.ReplayCount, History: hist}
	if len(hist) == 0 {
		fl.Entry = nil
	}
	full, err := WithBytes(ctx, r.cfg, fl)
	if err != nil {
		return fl, err
	}
	return full, herr
}

// history reads failure id's ledger records where the index saw them,
// in the order of its life. A record compaction replaced is skipped: its
// newer copy is read too.
func (r *Reader) history(ctx context.Context, id string) ([]ledger.Event, error) {
	locs := r.x.locations(id)
	if len(locs) == 0 {
		return nil, nil
	}
	c, err := kafkaclient.Reader(r.cfg, r.cfg.ReaderGroup(readerRole), kafkaclient.Read{EOF: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	topic := r.cfg.StateTopicName()
	var events []*ledger.Event
	for _, l := range locs {
		m, err := fetch(ctx, c, topic, l.partition, l.offset, opTimeout(r.cfg))
		if err != nil {
			return nil, err
		}
		if m == nil || int64(m.TopicPartition.Offset) != l.offset || !strings.HasPrefix(string(m.Key), ledger.Prefix+id+"|") {
			continue
		}
		if e, ok, err := ledger.Decode(string(m.Key), m.Value); ok && err == nil && e.ID == id {
			events = append(events, e)
		}
	}
	en := ledger.Fold(events)[id]
	if en == nil {
		return nil, nil
	}
	return en.History, nil
}

// fetch reads the committed record at offset of topic[p], or the next
// one when it is gone; nil when there is none. c reports partition ends
// (kafkaclient.Read{EOF: true}).
func fetch(ctx context.Context, c *kafka.Consumer, topic string, p int32, offset int64, bound time.Duration) (*kafka.Message, error) {
	if err := c.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: p, Offset: kafka.Offset(offset)}}); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		switch ev := c.Poll(200).(type) {
		case *kafka.Message:
			if ev.TopicPartition.Error != nil {
				return nil, ev.TopicPartition.Error
			}
			return ev, nil
		case kafka.PartitionEOF:
			if ev.Partition == p {
				return nil, nil
			}
		case kafka.Error:
			if ev.IsFatal() {
				return nil, ev
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("reading %s/%d/%d took longer than %s", topic, p, offset, bound)
}

// catchUpGC is the collector's target during a catch-up. The index holds
// no pointers, so a collection costs little however large it is, and what
// a catch-up allocates besides is short-lived: at the default 100 %, the
// heap would grow to twice the index before a collection; at 10 % the
// garbage of reading a million failures stays near 20 MiB (the console's
// peak over them: 276 MiB, against 300 MiB at 25 %).
const catchUpGC = 10

// lowerGC lowers the collector's target for a catch-up (never raises
// it: GOGC may be lower); the function it returns restores it and hands
// the garbage back to the system. Catch-ups may overlap (the console's
// and a replay's selection): the first lowers the target, the last
// restores the one from before the first.
func lowerGC() func() {
	lowered.Lock()
	if lowered.n == 0 {
		lowered.old = debug.SetGCPercent(catchUpGC)
		if lowered.old >= 0 && lowered.old < catchUpGC {
			debug.SetGCPercent(lowered.old)
		}
	}
	lowered.n++
	lowered.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			lowered.Lock()
			lowered.n--
			last := lowered.n == 0
			if last {
				debug.SetGCPercent(lowered.old)
			}
			lowered.Unlock()
			if last {
				debug.FreeOSMemory()
			}
		})
	}
}

// lowered is how many catch-ups run, and the target from before them.
var lowered struct {
	sync.Mutex
	n, old int
}
