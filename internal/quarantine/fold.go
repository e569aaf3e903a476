package quarantine

import (
	"hash/maphash"
	"math"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/ledger"
)

// ord is where a change stands in a failure's life (ledger.Before).
type ord struct {
	count int32
	rank  uint8
	at    int64
}

func (a ord) before(b ord) bool {
	if a.count != b.count {
		return a.count < b.count
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.at < b.at
}

var none = ord{count: -1}

// noSince marks a fold without an open or failed-again change yet.
const noSince = 1 << 30

// fold is the ledger's changes of one failure folded so far: what
// ledger.Fold decides from, one change at a time. A failure with one
// change keeps it in its entry (pack); a fold of its own is kept only
// for failures with more.
type fold struct {
	cur, dup, since, first, code, schema ord
	state, dupState                      uint8 // stateIndex
	curCode, dupCode, ledgerCode         uint32
	curReplay, dupReplay                 uint32
	ledgerSchema                         int32
	hasDup, discarded                    bool
	more                                 []loc // ledger records after the first
}

func newFold() fold {
	return fold{cur: none, dup: none, since: ord{count: noSince}, first: ord{count: noSince}, code: none, schema: none}
}

// add folds change e (its codes and replay id interned as code, replay).
func (f *fold) add(e *ledger.Event, o ord, code, replay uint32) {
	st := stateIndex(e.State)
	if o.before(f.first) {
		f.first = o
	}
	if e.Topic != "" && e.Code != "" && !o.before(f.code) {
		f.code, f.ledgerCode = o, code
	}
	if e.Topic != "" && e.SchemaVersion != 0 && !o.before(f.schema) {
		f.schema, f.ledgerSchema = o, int32(e.SchemaVersion)
	}
	if (e.State == ledger.Open || e.State == ledger.FailedAgain) && o.before(f.since) {
		f.since = o
	}
	if e.Outcome == ledger.OutcomeDuplicate {
		if !f.hasDup || !o.before(f.dup) {
			f.dup, f.dupState, f.dupCode, f.dupReplay, f.hasDup = o, st, code, replay, true
		}
	} else if !o.before(f.cur) {
		f.cur, f.state, f.curCode, f.curReplay = o, st, code, replay
	}
	if e.State == ledger.Discarded && e.Outcome != ledger.OutcomeDuplicate {
		f.discarded = true
	}
}

// derive sets what en shows from f, as ledger.Fold decides it.
func (f *fold) derive(en *entry) {
	st, code, replay, at := f.state, f.curCode, f.curReplay, f.cur.at
	switch {
	case f.cur.count < 0: // duplicates only: the latest decides
		st, code, replay, at = f.dupState, f.dupCode, f.dupReplay, f.dup.at
	case f.hasDup && ledger.States[st] == ledger.Replaying && f.dup.count >= f.cur.count:
		// The replay's record was a copy of a failure settled already.
		st = f.dupState
	}
	if f.discarded && ledger.States[st] != ledger.Resolved {
		st = stateIndex(ledger.Discarded)
	}
	if f.code.count >= 0 {
		code = f.ledgerCode
	}
	if f.schema.count >= 0 {
		en.schema = f.ledgerSchema
	}
	since := f.first.at
	if f.since.count != noSince {
		since = f.since.at
	}
	en.state, en.code, en.replayID, en.at, en.since = st, code, replay, at, since
}

// pack keeps the fold of en's only change, e, in en itself.
func pack(en *entry, e *ledger.Event, o ord) {
	en.oneCount, en.oneRank = o.count, o.rank
	en.flags &^= oneDup | oneSince | oneCode | oneSchema
	if e.Outcome == ledger.OutcomeDuplicate {
		en.flags |= oneDup
	}
	if e.State == ledger.Open || e.State == ledger.FailedAgain {
		en.flags |= oneSince
	}
	if e.Topic != "" && e.Code != "" {
		en.flags |= oneCode
	}
	if e.Topic != "" && e.SchemaVersion != 0 {
		en.flags |= oneSchema
	}
}

// unpack is the fold of en's only change (pack).
func unpack(en *entry) fold {
	f := newFold()
	o := ord{count: en.oneCount, rank: en.oneRank, at: en.at}
	f.first = o
	if en.flags&oneDup != 0 {
		f.dup, f.dupState, f.dupCode, f.dupReplay, f.hasDup = o, en.state, en.code, en.replayID, true
	} else {
		f.cur, f.state, f.curCode, f.curReplay = o, en.state, en.code, en.replayID
		f.discarded = ledger.States[en.state] == ledger.Discarded
	}
	if en.flags&oneSince != 0 {
		f.since = o
	}
	if en.flags&oneCode != 0 {
		f.code, f.ledgerCode = o, en.code
	}
	if en.flags&oneSchema != 0 {
		f.schema, f.ledgerSchema = o, en.schema
	}
	return f
}

func stateIndex(s ledger.State) uint8 {
	for i, x := range ledger.States {
		if x == s {
			return uint8(i) //nolint:gosec // a handful of states
		}
	}
	return 0
}

// applyLedger folds one state-topic record; records of other keys are
// skipped.
func (x *Index) applyLedger(m *kafka.Message) {
	key := string(m.Key)
	if !strings.HasPrefix(key, ledger.Prefix) || x.only != "" && !strings.HasPrefix(key, ledger.Prefix+x.only+"|") {
		return
	}
	e, ok, err := ledger.Decode(key, m.Value)
	x.mu.Lock()
	defer x.mu.Unlock()
	if err != nil && x.warning == nil {
		x.warning = err
	}
	if !ok || e == nil || x.only != "" && e.ID != x.only {
		return
	}
	x.apply(e, loc{m.TopicPartition.Partition, int64(m.TopicPartition.Offset)})
}

// apply folds change e, read at l, as ledger.Fold would; called with mu
// held.
func (x *Index) apply(e *ledger.Event, l loc) {
	x.version++
	i := x.get(e.ID)
	en := x.entry(i)
	o := ord{count: int32(e.ReplayCount), rank: uint8(ledger.Rank(e)), at: nanos(e.At)} //nolint:gosec // a replay count
	code, replay := x.names.id(e.Code), x.names.id(e.ReplayID)
	since := en.since
	switch {
	case en.flags&multi != 0:
		f := x.folds[i]
		f.add(e, o, code, replay)
		f.more = append(f.more, l)
		f.derive(en)
	case en.flags&inLedger != 0:
		// A second change: the failure gets a fold of its own.
		f := unpack(en)
		f.add(e, o, code, replay)
		f.more = append(f.more, l)
		f.derive(en)
		x.folds[i] = &f
		en.flags |= multi
	default:
		// The first change read; what a quarantine record said of a
		// failure the ledger did not know yet gives way to it.
		en.flags |= inLedger
		en.first, en.firstPart = l.offset, l.partition
		en.srcTopic, en.srcPart, en.srcOff = 0, 0, 0
		f := newFold()
		f.add(e, o, code, replay)
		f.derive(en)
		pack(en, e, o)
	}
	en.count = max(en.count, o.count)
	if e.Source.Topic != "" {
		en.srcTopic, en.srcPart, en.srcOff = x.names.id(e.Source.Topic), e.Source.Partition, e.Source.Offset
	}
	if en.since != since {
		x.dirty = true
	}
	if e.ReplayID != "" {
		x.replay(e)
	}
}

func (x *Index) replay(e *ledger.Event) {
	id := x.names.id(e.ReplayID)
	rp := x.replays[id]
	if rp == nil {
		rp = &replayAgg{}
		x.replays[id] = rp
	}
	switch {
	case e.State == ledger.Replaying:
		rp.published++
		rp.actor, rp.reason = e.Actor, e.Reason
		if at := nanos(e.At); rp.at == 0 || at < rp.at {
			rp.at = at
		}
	case e.State == ledger.Resolved && e.Outcome != ledger.OutcomeDuplicate:
		rp.resolved++
	case e.State == ledger.FailedAgain:
		rp.failedAgain++
	}
}

// addRecord joins one record of src's quarantine topic to its failure;
// the latest one wins.
func (x *Index) addRecord(m *kafka.Message, topic, src string) {
	f, err := envelope.Parse(m.Headers)
	if f == nil || x.only != "" && f.ID != x.only {
		return // not relay's
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.version++
	en := x.entry(x.get(f.ID))
	if en.flags&(inLedger|hasRecord) == 0 {
		// Quarantined before the ledger existed (or its change is not
		// read yet): open.
		st := f.SourceTopic
		if st == "" {
			st = src
		}
		en.state, en.code, en.srcTopic = stateIndex(ledger.Open), x.names.id(f.Code), x.names.id(st)
		en.srcPart, en.srcOff, en.since = f.SourcePartition, f.SourceOffset, nanos(f.LastFailedAt)
		en.schema = int32(f.SchemaVersion) //nolint:gosec // a schema version
		x.dirty = true
	}
	en.flags |= hasRecord
	if err != nil {
		en.flags |= damaged
	} else {
		en.flags &^= damaged
	}
	en.recTopic, en.recPart, en.recOff = x.names.id(topic), m.TopicPartition.Partition, int64(m.TopicPartition.Offset)
	en.recTime = 0
	if !m.Timestamp.IsZero() {
		en.recTime = m.Timestamp.UnixNano()
	}
	en.keyHash = maphash.Bytes(x.seed, m.Key)
	en.class = x.names.id(f.Class)
	en.count = max(en.count, int32(f.ReplayCount)) //nolint:gosec // a replay count
	if en.schema == 0 {
		en.schema = int32(f.SchemaVersion) //nolint:gosec // a schema version
	}
}

// sinceTime is when en was first quarantined.
func (en *entry) sinceTime() time.Time { return timeOf(en.since) }

// zeroTime stands for time.Time{}, whose UnixNano is undefined: a change
// without a time, a record whose envelope has none. It sorts first, as
// the zero time does.
const zeroTime = math.MinInt64

// nanos is t in unix ns, the zero time as zeroTime.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return zeroTime
	}
	return t.UnixNano()
}

// timeOf is the time nanos gave ns.
func timeOf(ns int64) time.Time {
	if ns == zeroTime {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
