package quarantine

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"relay/internal/envelope"
	"relay/internal/ledger"
)

// Index is a compact, growing view of a quarantine: what the lists, the
// summaries and the console's pages need of every failure, in about 150
// bytes each that the garbage collector never scans (a Snapshot holds
// about 3.5 KiB). It folds the ledger one change at a time, as
// ledger.Fold folds them all, and joins quarantine records as Load does,
// so it can follow the topics instead of reading them again. A failure's
// history, error message and bytes are not held: they are read where they
// are when a page asks for them (Reader.Full). It is safe for concurrent
// use.
type Index struct {
	mu      sync.RWMutex
	entries [][]entry // in chunks of entryChunk: growing never copies them
	n       int32
	ids     idArena
	byHash  map[uint64]int32 // by the id's hash
	collide map[string]int32 // the ids whose hash another id has
	order   []int32          // oldest first (then by id)
	dirty   bool             // order needs sorting
	names   strtab
	seed    maphash.Seed
	replays map[uint32]*replayAgg
	folds   map[int32]*fold // of the failures with more than one change
	// retention is each quarantine topic's known, finite retention, and
	// low where retention has deleted each partition of it up to.
	retention map[string]time.Duration
	low       map[uint32][]int64 // by partition
	warning   error
	// only keeps one failure id (a single failure's page), when set.
	only string
	// version counts the changes to what Each yields: a summary made at
	// one version holds until the next.
	version uint64
}

// loc is where one ledger record is in the state topic.
type loc struct {
	partition int32
	offset    int64
}

// entry is one failure, without pointers: strings are interned (strtab)
// or in the id arena.
type entry struct {
	since, at        int64 // first quarantined; the deciding change (unix ns)
	srcOff, recOff   int64 // Source.Offset; the quarantine record's offset
	recTime, first   int64 // the record's timestamp (0 unknown); the first ledger record's offset
	keyHash          uint64
	id               uint32 // in the arena
	idLen            uint16
	state, oneRank   uint8 // stateIndex; pack
	firstPart        int32
	srcPart, recPart int32
	srcTopic         uint32
	recTopic         uint32
	code, class      uint32
	replayID         uint32 // of the deciding change
	count, schema    int32  // the highest replay count seen; the writer schema version
	oneCount         int32  // pack
	flags            uint16
}

const (
	inLedger uint16 = 1 << iota
	hasRecord
	damaged
	multi // its fold is in Index.folds
	oneDup
	oneSince
	oneCode
	oneSchema
)

// replayAgg is what the console's recent replays show of one replay.
type replayAgg struct {
	published, resolved, failedAgain int
	actor, reason                    string
	at                               int64 // its first replaying change
}

// strtab interns strings: codes, classes, topics and replay ids repeat
// across failures.
type strtab struct {
	ids   map[string]uint32
	names []string
}

func (t *strtab) id(s string) uint32 {
	if t.ids == nil {
		t.ids, t.names = map[string]uint32{"": 0}, []string{""}
	}
	if i, ok := t.ids[s]; ok {
		return i
	}
	s = strings.Clone(s)
	t.ids[s] = uint32(len(t.names)) //nolint:gosec // fewer than 2^32 names
	t.names = append(t.names, s)
	return uint32(len(t.names) - 1) //nolint:gosec // as above
}

func (t *strtab) name(i uint32) string { return t.names[i] }

// idArena holds failure ids back to back in chunks that never move, so
// a string of one can point into it.
type idArena struct{ chunks [][]byte }

const chunkBits = 20

func (a *idArena) add(id string) (uint32, uint16) {
	n := len(a.chunks)
	if n == 0 || len(a.chunks[n-1])+len(id) > cap(a.chunks[n-1]) {
		a.chunks = append(a.chunks, make([]byte, 0, max(1<<chunkBits, len(id))))
		n++
	}
	c := &a.chunks[n-1]
	at := len(*c)
	*c = append(*c, id...)
	return uint32(n-1)<<chunkBits | uint32(at), uint16(len(id)) //nolint:gosec // ids are short; chunks are 1 MiB
}

// get is the string of an id added at (off, n): it points into a chunk,
// whose bytes are never written again.
func (a *idArena) get(off uint32, n uint16) string {
	if n == 0 {
		return ""
	}
	c := a.chunks[off>>chunkBits]
	return unsafe.String(&c[off&(1<<chunkBits-1)], int(n)) //nolint:gosec // see get
}

// entryChunk is how many entries are allocated at once (1.75 MiB).
const entryChunk = 1 << 14

// entry is failure i; called with mu held.
func (x *Index) entry(i int32) *entry { return &x.entries[i/entryChunk][i%entryChunk] }

// NewIndex is an empty index.
func NewIndex() *Index {
	return &Index{byHash: map[uint64]int32{}, collide: map[string]int32{}, seed: maphash.MakeSeed(), replays: map[uint32]*replayAgg{},
		folds: map[int32]*fold{}, retention: map[string]time.Duration{}, low: map[uint32][]int64{}}
}

// Len is the number of failures the index holds.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return int(x.n)
}

// Version changes whenever what Each yields may have changed: a change
// folded, a quarantine record joined, a topic's retention or its low
// watermarks moved. A summary of the index made at one version is still
// the index's at the same version.
func (x *Index) Version() uint64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.version
}

// Warning is the first ledger record that could not be read, if any.
func (x *Index) Warning() error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.warning
}

func (x *Index) idOf(en *entry) string { return x.ids.get(en.id, en.idLen) }

// idHash hashes failure ids. It is a variable for a test: 64-bit hashes
// of real ids do not collide, so only ids made to hash alike reach the
// collide map.
var idHash = maphash.String

// lookup is failure id's entry; called with mu held.
func (x *Index) lookup(id string) (int32, bool) {
	h := idHash(x.seed, id)
	if i, ok := x.byHash[h]; ok && x.idOf(x.entry(i)) == id {
		return i, true
	}
	i, ok := x.collide[id]
	return i, ok
}

// get is failure id's entry, added if new; called with mu held.
func (x *Index) get(id string) int32 {
	if i, ok := x.lookup(id); ok {
		return i
	}
	x.names.id("")
	i := x.n
	off, n := x.ids.add(id)
	if i%entryChunk == 0 {
		x.entries = append(x.entries, make([]entry, entryChunk))
	}
	*x.entry(i) = entry{id: off, idLen: n, recOff: -1}
	x.n++
	if h := idHash(x.seed, id); !x.hashTaken(h) {
		x.byHash[h] = i
	} else {
		x.collide[x.idOf(x.entry(i))] = i
	}
	x.order = append(x.order, i)
	x.dirty = true
	return i
}

func (x *Index) hashTaken(h uint64) bool {
	_, ok := x.byHash[h]
	return ok
}

// sort orders the failures oldest first, then by id; called with mu held.
func (x *Index) sort() {
	if !x.dirty {
		return
	}
	slices.SortFunc(x.order, func(a, b int32) int {
		ea, eb := x.entry(a), x.entry(b)
		if ea.since != eb.since {
			if ea.since < eb.since {
				return -1
			}
			return 1
		}
		return strings.Compare(x.idOf(ea), x.idOf(eb))
	})
	x.dirty = false
}

// known says whether en is a failure still: in the ledger, or with its
// quarantine record (one that was quarantined before the ledger existed
// is forgotten with its record).
func (x *Index) known(en *entry) bool { return en.flags&inLedger != 0 || !x.gone(en) }

// gone says whether en's quarantine record is gone (retention).
func (x *Index) gone(en *entry) bool {
	low := x.low[en.recTopic]
	return int(en.recPart) < len(low) && en.recOff < low[en.recPart]
}

// fill makes fl (and its record) the failure of en, for a moment: the
// strings are shared, nothing else is.
func (x *Index) fill(en *entry, fl *Failure, rec *Record, env *envelope.Failure) {
	*fl = Failure{ID: x.idOf(en), State: ledger.States[en.state], Code: x.names.name(en.code), Since: en.sinceTime(),
		Source:        ledger.Source{Topic: x.names.name(en.srcTopic), Partition: en.srcPart, Offset: en.srcOff},
		SchemaVersion: int(en.schema), ReplayCount: int(en.count), ReplayID: x.names.name(en.replayID), keyHash: en.keyHash, seed: &x.seed}
	if en.flags&inLedger != 0 {
		fl.ChangedAt = timeOf(en.at)
	}
	if en.flags&hasRecord == 0 || x.gone(en) {
		return // none, or gone (retention)
	}
	*env = envelope.Failure{ID: fl.ID, Class: x.names.name(en.class), Code: fl.Code, SourceTopic: fl.Source.Topic,
		SourcePartition: en.srcPart, SourceOffset: en.srcOff, SchemaVersion: int(en.schema), ReplayCount: int(en.count)}
	*rec = Record{Failure: env, Topic: x.names.name(en.recTopic), Partition: en.recPart, Offset: en.recOff}
	if en.recTime != 0 {
		rec.Timestamp = time.Unix(0, en.recTime)
	}
	if en.flags&damaged != 0 {
		rec.Damaged = errDamaged
	}
	fl.Record = rec
}

// Each calls fn with every failure, oldest first, until it returns
// false. fl is valid only during the call: keep a copy (Get), not it.
func (x *Index) Each(fn func(fl *Failure) bool) {
	x.mu.Lock()
	x.sort()
	x.mu.Unlock()
	x.mu.RLock()
	defer x.mu.RUnlock()
	var (
		fl  Failure
		rec Record
		env envelope.Failure
	)
	for _, i := range x.order {
		if !x.known(x.entry(i)) {
			continue
		}
		x.fill(x.entry(i), &fl, &rec, &env)
		if !fn(&fl) {
			return
		}
	}
}

// Get is failure id, to keep; nil when the index does not hold it.
func (x *Index) Get(id string) *Failure {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i, ok := x.lookup(id)
	if !ok || !x.known(x.entry(i)) {
		return nil
	}
	fl, rec, env := &Failure{}, &Record{}, &envelope.Failure{}
	x.fill(x.entry(i), fl, rec, env)
	return fl
}

// locations are where failure id's ledger records are.
func (x *Index) locations(id string) []loc {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i, ok := x.lookup(id)
	if !ok || x.entry(i).flags&inLedger == 0 {
		return nil
	}
	out := []loc{{x.entry(i).firstPart, x.entry(i).first}}
	if f := x.folds[i]; f != nil {
		out = append(out, f.more...)
	}
	return out
}

var errDamaged = damagedError{}

type damagedError struct{}

func (damagedError) Error() string { return "its failure envelope cannot be read whole" }

// ReplayTally is what the ledger says of one replay.
type ReplayTally struct {
	ID, Actor, Reason                string
	At                               time.Time // its first replaying change
	Published, Resolved, FailedAgain int
}

// Replays are the n latest replays the ledger knows of, latest first.
func (x *Index) Replays(n int) []ReplayTally {
	x.mu.RLock()
	out := make([]ReplayTally, 0, len(x.replays))
	for id, rp := range x.replays {
		t := ReplayTally{ID: x.names.name(id), Actor: rp.actor, Reason: rp.reason, Published: rp.published, Resolved: rp.resolved,
			FailedAgain: rp.failedAgain}
		if rp.at != 0 {
			t.At = timeOf(rp.at)
		}
		out = append(out, t)
	}
	x.mu.RUnlock()
	slices.SortFunc(out, func(a, b ReplayTally) int {
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out[:min(n, len(out))]
}

// setRetention records topic's retention (ok false: none, or infinite).
func (x *Index) setRetention(topic string, ret time.Duration, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	old, had := x.retention[topic]
	if had == ok && old == ret {
		return
	}
	if ok {
		x.retention[topic] = ret
	} else {
		delete(x.retention, topic)
	}
	x.version++
}

// setLow records where retention has deleted each partition of topic up
// to.
func (x *Index) setLow(topic string, lows []int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	id := x.names.id(topic)
	if slices.Equal(x.low[id], lows) {
		return
	}
	x.low[id] = lows
	x.version++
}
