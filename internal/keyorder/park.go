package keyorder

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Limits bound parking. A follower of a blocked key is parked (kept in
// memory, its source offset uncommitted) only while all of them hold;
// else it is copied into its head's tier, as without parking.
type Limits struct {
	// Records and Bytes bound the parked records an instance keeps
	// (their keys, values and headers). Records 0: parking is off.
	Records int
	Bytes   int64
	// Wait is how far ahead its head's due time may be: a key blocked
	// longer (a long tier) copies its followers, so a commit does not
	// stay behind for as long.
	Wait time.Duration
	// MaxAge is how long a follower stays parked at most, whatever its
	// head does (a head retried in one short tier again and again keeps
	// every hop within Wait): past it, it is copied into the head's tier.
	// 0: no bound.
	MaxAge time.Duration
	// Metadata bounds a partition's parked set as offset metadata, under
	// the broker's offset.metadata.max.bytes.
	Metadata int
}

// DefaultMetadata is the default Metadata: the broker's default
// offset.metadata.max.bytes (4096), less room for an offset's growth.
const DefaultMetadata = 4000

// metadataRoom is what MetadataFor leaves below the broker's limit.
const metadataRoom = 4096 - DefaultMetadata

// MetadataFor is Metadata under a broker's offset.metadata.max.bytes of
// limit (0: unknown, the default's): a broker configured below the
// default must not refuse every commit with OFFSET_METADATA_TOO_LARGE
// while relay parks, aborts, parks again. 0 when the limit leaves no
// room: followers are then copied, never parked.
func MetadataFor(limit int) int {
	if limit <= 0 {
		return DefaultMetadata
	}
	return max(0, min(DefaultMetadata, limit-metadataRoom))
}

type held[R any] struct {
	rec  R
	size int64
}

// parked is what a Set keeps of parked records: the records themselves,
// those whose turn it is, and, per partition read again from a commit
// with a parked set, that set until the partition is read past it.
type parked[R any] struct {
	// spillAfter: a key whose head is due later than this from now
	// hands its parked records back to be copied into the tier (0:
	// never); now is the clock.
	spillAfter time.Duration
	// maxAge: a parked record older than this is handed back to be
	// copied (0: never); swept is when Ready last looked for them.
	maxAge time.Duration
	swept  time.Time
	// refused: the brokers refused a commit's parked set as too large
	// (RefuseParking): nothing is parked any more, and every parked
	// record is handed back to be copied.
	refused bool
	// paused: the group does not agree on parking now (Pause): nothing new
	// is parked. withheld: it has not for long (Withhold): every parked
	// record is handed back to be copied, too, until it agrees again.
	paused, withheld bool
	now              func() time.Time
	behind           map[Part]int64 // offsets each partition's last floor stays behind its next
	mem              map[Part]map[int64]held[R]
	ready            map[string]int64 // key → offset of its parked record whose turn it is
	windows          map[Part]Parked
	records          int
	bytes            int64
	gone             gone // parked records gone from their source
}

func (k *parked[R]) init() {
	if k.mem == nil {
		k.behind = map[Part]int64{}
		k.mem = map[Part]map[int64]held[R]{}
		k.ready = map[string]int64{}
		k.windows = map[Part]Parked{}
		k.gone.init()
	}
}

// Held is how many parked records are in memory, and their bytes.
func (k *Set[R]) Held() (records int, bytes int64) { return k.records, k.bytes }

// CanPark says whether a record of size bytes at offset of p may be
// parked behind a head due at due, under lim; why says what stops it.
func (k *Set[R]) CanPark(lim Limits, p Part, offset, size int64, due, now time.Time) (ok bool, why string) {
	switch {
	case lim.Records <= 0:
		return false, "off"
	case k.refused:
		return false, "metadata"
	case k.paused || k.withheld:
		return false, "group"
	case k.records+1 > lim.Records:
		return false, "records"
	case k.bytes+size > lim.Bytes:
		return false, "bytes"
	case due.Sub(now) > lim.Wait:
		return false, "wait"
	}
	offs := append(k.ParkedOffsets(p), offset)
	slices.Sort(offs)
	hi := offset + 1
	if w, ok := k.windows[p]; ok {
		for _, o := range w.Offsets {
			if !k.droppedOf(p, o) {
				offs = append(offs, o)
			}
		}
		slices.Sort(offs)
		offs = slices.Compact(offs)
		hi = max(hi, w.Hi)
	}
	hi = max(hi, offs[len(offs)-1]+1)
	if len(offs) > MaxParked || EncodedLen(Parked{Offsets: offs, Hi: hi}) > lim.Metadata {
		return false, "metadata"
	}
	return true, ""
}

// Keep keeps rec, the record at offset of p, in memory: a record parked
// now, or a parked record read again.
func (k *Set[R]) Keep(p Part, offset int64, rec R, size int64) {
	k.init()
	m := k.mem[p]
	if m == nil {
		m = map[int64]held[R]{}
		k.mem[p] = m
	}
	if old, ok := m[offset]; ok {
		k.records--
		k.bytes -= old.size
	}
	m[offset] = held[R]{rec: rec, size: size}
	k.records++
	k.bytes += size
	if r, ok := k.slots[p][offset]; ok {
		k.recheck(r.sk)
	}
}

// Kept is the record kept at offset of p, if any.
func (k *Set[R]) Kept(p Part, offset int64) (rec R, ok bool) {
	h, ok := k.mem[p][offset]
	return h.rec, ok
}

// Drop lets the record at offset of p go from memory unless a state still
// parks it there.
func (k *Set[R]) Drop(p Part, offset int64) {
	if _, parked := k.slots[p][offset]; parked {
		return
	}
	k.drop(p, offset)
}

func (k *Set[R]) drop(p Part, offset int64) {
	m := k.mem[p]
	h, ok := m[offset]
	if !ok {
		return
	}
	delete(m, offset)
	if len(m) == 0 {
		delete(k.mem, p)
	}
	k.records--
	k.bytes -= h.size
}

// Spill makes a key whose head is due later than after from now (by
// now), or whose oldest parked record was parked more than maxAge ago,
// hand its parked records back, to be copied into the head's tier: a key
// blocked for long does not hold its partition's commit back. 0 turns
// either off.
func (k *Set[R]) Spill(after, maxAge time.Duration, now func() time.Time) {
	k.spillAfter, k.maxAge, k.now = after, maxAge, now
}

// RefuseParking stops parking for good (until restart): the brokers
// refused a commit's parked set as too large, which a smaller bound read
// at start should have prevented (the limit changed since, or could not
// be read). Every key hands its parked records back, one after the
// other, to be copied into its head's tier, so the partitions' commits
// shrink back to no metadata.
func (k *Set[R]) RefuseParking() {
	k.init()
	k.refused = true
	for sk, s := range k.states {
		if len(s.Parked) > 0 {
			k.recheck(sk)
		}
	}
}

// Pause stops new parking while the members of the group do not all
// announce it (on), and lets it start again once they do (off). What is
// parked stays: a member that has just restarted is without its record
// for a moment.
func (k *Set[R]) Pause(on bool) { k.paused = on }

// Withhold stops parking while the members of the group have not
// announced it for long (on), and lets it start again once they do (off).
// Stopping, every key hands its parked records back, one after the other,
// to be copied into its head's tier: a member that does not park may take
// any partition over at the next rebalance, and the sooner the commits
// carry no parked set the less of it it reads again.
func (k *Set[R]) Withhold(on bool) {
	k.init()
	if k.withheld == on {
		return
	}
	k.withheld = on
	for sk, s := range k.states {
		if len(s.Parked) > 0 {
			k.recheck(sk)
		}
	}
}

// recheck notes whether the first parked record of sk's queue is in
// memory and to be handed back: its turn has come, or its key spills.
func (k *Set[R]) recheck(sk string) {
	delete(k.ready, sk)
	s := k.states[sk]
	if s == nil {
		return
	}
	first, ok := s.FirstParked()
	if !ok {
		return
	}
	spill := k.refused || k.withheld || k.spillAfter > 0 && k.now != nil && s.NotBefore.Sub(k.now()) > k.spillAfter ||
		k.maxAge > 0 && k.now != nil && first.At > 0 && k.now().Sub(time.UnixMilli(first.At)) > k.maxAge
	if first.Seq != s.Next && !spill {
		return
	}
	p, ok := PartOf(sk)
	if !ok {
		return
	}
	if _, in := k.mem[p][first.Offset]; in {
		k.ready[sk] = first.Offset
	}
}

// sweepAged looks, at most once a second, for keys whose oldest parked
// record has outlived maxAge: nothing else happens to such a key while
// its head waits, so no other call would notice.
func (k *Set[R]) sweepAged() {
	if k.maxAge <= 0 || k.now == nil {
		return
	}
	now := k.now()
	if now.Sub(k.swept) < time.Second {
		return
	}
	k.swept = now
	for _, refs := range k.slots {
		for _, r := range refs {
			k.recheck(r.sk)
		}
	}
}

// Ready are the parked records whose turn has come (or whose key spills),
// by partition and offset: they are to be handled again.
func (k *Set[R]) Ready() []R {
	k.sweepAged()
	if len(k.ready) == 0 {
		return nil
	}
	type at struct {
		p   Part
		off int64
	}
	ats := make([]at, 0, len(k.ready))
	for sk, off := range k.ready {
		p, _ := PartOf(sk)
		ats = append(ats, at{p, off})
	}
	slices.SortFunc(ats, func(a, b at) int {
		return cmp.Or(cmp.Compare(a.p.Topic, b.p.Topic), cmp.Compare(a.p.Partition, b.p.Partition), cmp.Compare(a.off, b.off))
	})
	out := make([]R, len(ats))
	for i, a := range ats {
		out[i] = k.mem[a.p][a.off].rec
	}
	return out
}

// Resume is a partition being read again from offset, committed with
// metadata: the parked records it kept are read again too, so memory
// lets them go, and the parked set committed (if any) tells which
// records up to its handled position are settled.
func (k *Set[R]) Resume(p Part, offset int64, metadata string) error {
	k.init()
	for off := range k.mem[p] {
		k.drop(p, off)
		if r, ok := k.slots[p][off]; ok {
			k.recheck(r.sk)
		}
	}
	delete(k.windows, p)
	k.rereads(p, offset)
	w, ok, err := Decode(offset, metadata)
	if err != nil {
		return fmt.Errorf("%s[%d]: %w", p.Topic, p.Partition, err)
	}
	if ok {
		k.windows[p] = w
	}
	return nil
}

// Skip says whether the record at offset of p was settled before the
// commit its partition was read again from: it is not handled again.
func (k *Set[R]) Skip(p Part, offset int64) bool {
	w, ok := k.windows[p]
	if !ok {
		return false
	}
	if offset >= w.Hi {
		delete(k.windows, p) // read past it
		return false
	}
	return w.Settled(offset)
}

// Floor is what p commits when its records below next are handled: its
// lowest parked offset, and the parked set as metadata; next and no
// metadata when nothing is parked.
func (k *Set[R]) Floor(p Part, next int64) (int64, string) {
	offs := k.ParkedOffsets(p)
	if from, ok := k.gone.from[p]; ok {
		// Never below the offset p is read again from: the records
		// below it were settled by that commit, and a parked one below
		// it is never read again (it is lost).
		next = max(next, from)
		offs = slices.DeleteFunc(offs, func(o int64) bool { return o < from })
	}
	// A parked offset from next on is not read yet: it stays above the
	// commit, unless the committed set read again names it (below).
	offs = slices.DeleteFunc(offs, func(o int64) bool { return o >= next })
	hi := next
	if w, ok := k.windows[p]; ok && w.Hi > next {
		// Read again, not yet past the committed set: its parked
		// offsets not read yet are parked still (unless lost since),
		// and the offsets up to its handled position were settled.
		for _, o := range w.Offsets {
			if o >= next && !k.droppedOf(p, o) {
				offs = append(offs, o)
			}
		}
		slices.Sort(offs)
		offs = slices.Compact(offs)
		hi = w.Hi
	}
	if len(offs) == 0 {
		// Nothing parked: the records up to the handled position (the
		// committed set's, while it is being read again) are settled.
		delete(k.behind, p)
		return hi, ""
	}
	k.init()
	k.behind[p] = next - offs[0]
	hi = max(hi, offs[len(offs)-1]+1)
	md, err := Encode(Parked{Offsets: offs, Hi: hi})
	if err != nil {
		// Not expected: the offsets are sorted and distinct.
		panic(fmt.Sprintf("keyorder: parked set of %s[%d]: %v", p.Topic, p.Partition, err)) //nolint:forbidigo // a bug, not an input
	}
	return offs[0], md
}

// Stats is what a Set holds parked, for the metrics.
type Stats struct {
	Records, Bytes int64
	// Behind is how far each partition's last floor stayed behind its
	// handled position.
	Behind map[Part]int64
}

// Stats is a copy of what k holds parked.
func (k *Set[R]) Stats() Stats {
	b := make(map[Part]int64, len(k.behind))
	for p, n := range k.behind {
		b[p] = n
	}
	return Stats{Records: int64(k.records), Bytes: k.bytes, Behind: b}
}

func (k *parked[R]) forget(partitions []int32) {
	for p := range k.behind {
		if slices.Contains(partitions, p.Partition) {
			delete(k.behind, p)
		}
	}
	for p, m := range k.mem {
		if slices.Contains(partitions, p.Partition) {
			for off := range m {
				h := m[off]
				k.records--
				k.bytes -= h.size
			}
			delete(k.mem, p)
		}
	}
	for p := range k.windows {
		if slices.Contains(partitions, p.Partition) {
			delete(k.windows, p)
		}
	}
	for sk := range k.ready {
		if p, ok := PartOf(sk); ok && slices.Contains(partitions, p.Partition) {
			delete(k.ready, sk)
		}
	}
	k.gone.forget(partitions)
}
