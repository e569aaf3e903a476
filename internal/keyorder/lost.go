package keyorder

import (
	"maps"
	"slices"
)

// A parked record is read again from its source partition whenever the
// partition is read again from its commit (an assignment, a rewind). One
// that is no longer there (retention or DeleteRecords trimmed the log
// past it, a reset of the group's offset skipped it) would otherwise
// never take its turn: its key would stall, and its partition commit no
// further than it, for ever. gone finds such records: the read passed
// their offset without seeing them (Passed), or the partition's log now
// starts above them (Trimmed). Each is lost (Lose): the key's queue
// passes over it, and the partition commits past it.
type gone struct {
	// await is, per partition, the parked offsets whose records are to
	// be read again, ascending; stale says to work it out again from
	// the slots (the partition is read again, or states were restored or
	// undone).
	await map[Part][]int64
	stale map[Part]bool
	// found are the parked offsets found gone, per partition, until
	// TakeLost; dropped, those taken since the partition was read again
	// (its floor no longer stops at them, though the parked set it was
	// read again from still names them).
	found, dropped map[Part]map[int64]bool
	// from is where each partition is read again from, its committed
	// offset: a parked record below it is never read again.
	from map[Part]int64
	// suspect are the parked offsets below the partition's log start at
	// the last look (Trimmed): found gone only if still so at the next,
	// when a record fetched before the log moved has been handed to the
	// loop and read again.
	suspect map[Part]map[int64]bool
}

func (g *gone) init() {
	g.await = map[Part][]int64{}
	g.stale = map[Part]bool{}
	g.found = map[Part]map[int64]bool{}
	g.dropped = map[Part]map[int64]bool{}
	g.from = map[Part]int64{}
	g.suspect = map[Part]map[int64]bool{}
}

func (g *gone) forget(partitions []int32) {
	var parts []Part
	for _, m := range []map[Part]bool{g.stale} {
		for p := range m {
			parts = append(parts, p)
		}
	}
	for p := range g.await {
		parts = append(parts, p)
	}
	for _, m := range []map[Part]map[int64]bool{g.found, g.dropped, g.suspect} {
		for p := range m {
			parts = append(parts, p)
		}
	}
	for p := range g.from {
		parts = append(parts, p)
	}
	for _, p := range parts {
		if slices.Contains(partitions, p.Partition) {
			g.drop(p)
		}
	}
}

func (g *gone) drop(p Part) {
	delete(g.stale, p)
	delete(g.await, p)
	delete(g.found, p)
	delete(g.dropped, p)
	delete(g.from, p)
	delete(g.suspect, p)
}

// rereads notes that p is read again from its commit at offset (negative:
// nothing committed): every parked record of p is to be read again, and
// what was found gone before is found again or not.
func (k *Set[R]) rereads(p Part, offset int64) {
	k.gone.drop(p)
	k.gone.stale[p] = true
	if offset >= 0 {
		k.gone.from[p] = offset
	}
}

// droppedOf says whether the parked offset o of p was lost since p was
// read again.
func (k *Set[R]) droppedOf(p Part, o int64) bool { return k.gone.dropped[p][o] }

// parks says whether s (nil: none) parks a record at offset.
func (s *State) parks(offset int64) bool {
	if s == nil {
		return false
	}
	for _, sl := range s.Parked {
		if sl.Offset == offset && !sl.Lost {
			return true
		}
	}
	return false
}

// awaited is the parked offsets of p whose records are to be read again,
// worked out again if stale.
func (k *Set[R]) awaited(p Part) []int64 {
	if !k.gone.stale[p] {
		return k.gone.await[p]
	}
	delete(k.gone.stale, p)
	var offs []int64
	from, resumed := k.gone.from[p]
	for o := range k.slots[p] {
		if _, in := k.mem[p][o]; in {
			continue
		}
		if resumed && o < from {
			// Below the offset the partition is read again from (the
			// group's offset was moved past it): never read again.
			k.found(p, o)
			continue
		}
		offs = append(offs, o)
	}
	slices.Sort(offs)
	if len(offs) == 0 {
		delete(k.gone.await, p)
	} else {
		k.gone.await[p] = offs
	}
	return offs
}

// Passed is the read of p's record at offset (not a parked record handed
// back): a parked record below it that was not read again is gone. A
// record of p read since the last look may come from the consumer's
// queue, fetched before the log moved: the log start's suspects wait for
// a look with nothing read in between.
func (k *Set[R]) Passed(p Part, offset int64) {
	if k.gone.await == nil {
		return // nothing was ever parked or restored
	}
	delete(k.gone.suspect, p)
	k.passBelow(p, offset, offset+1)
}

// Look works out which parked records of p are still to be read again,
// finding those below the offset p is read again from gone.
func (k *Set[R]) Look(p Part) {
	if k.gone.await != nil {
		k.awaited(p)
	}
}

// Trimmed is p's log starting at start, as the consumer last heard it: a
// parked record below it that was not read again, and was below it at
// the previous look too with no record of p read since, is gone. (The
// consumer may have fetched the record before the log moved, and not
// handed it to the loop yet: a partition whose records still arrive
// hands it over, or passes it, by itself.)
func (k *Set[R]) Trimmed(p Part, start int64) {
	if k.gone.await == nil {
		return
	}
	q := k.awaited(p)
	was := k.gone.suspect[p]
	now := map[int64]bool{}
	i := 0
	for ; i < len(q) && q[i] < start; i++ {
		if was[q[i]] {
			k.found(p, q[i])
			continue
		}
		now[q[i]] = true
	}
	delete(k.gone.suspect, p)
	if len(now) > 0 {
		k.gone.suspect[p] = now
	}
	// The found ones are no longer awaited; the suspects still are.
	rest := make([]int64, 0, len(q))
	for _, o := range q {
		if !k.gone.found[p][o] {
			rest = append(rest, o)
		}
	}
	if len(rest) == 0 {
		delete(k.gone.await, p)
	} else {
		k.gone.await[p] = rest
	}
}

// passBelow drops the awaited offsets of p below upTo, finding those
// below below gone.
func (k *Set[R]) passBelow(p Part, below, upTo int64) {
	q := k.awaited(p)
	i := 0
	for ; i < len(q) && q[i] < upTo; i++ {
		if q[i] < below {
			k.found(p, q[i])
		}
	}
	if i == 0 {
		return
	}
	if i == len(q) {
		delete(k.gone.await, p)
		return
	}
	k.gone.await[p] = q[i:]
}

// found notes that the parked record at offset of p is gone, if it is
// still parked and was not read again.
func (k *Set[R]) found(p Part, offset int64) {
	if _, parked := k.slots[p][offset]; !parked {
		return
	}
	if _, in := k.mem[p][offset]; in {
		return
	}
	if k.gone.found[p] == nil {
		k.gone.found[p] = map[int64]bool{}
	}
	k.gone.found[p][offset] = true
}

// Awaiting are the partitions with parked records still to be read again.
func (k *Set[R]) Awaiting() []Part {
	var out []Part
	for p := range k.gone.stale {
		out = append(out, p)
	}
	for p := range k.gone.await {
		if !k.gone.stale[p] {
			out = append(out, p)
		}
	}
	return out
}

// LostParts are the partitions with parked records found gone, each with
// the lowest offset found gone.
func (k *Set[R]) LostParts() map[Part]int64 {
	out := make(map[Part]int64, len(k.gone.found))
	for p, offs := range k.gone.found {
		out[p] = slices.Min(slices.Collect(maps.Keys(offs)))
	}
	return out
}

// GoneSlot is a parked record found gone: its key, its place in the key's
// queue and its offset.
type GoneSlot struct {
	Key    string
	Seq    int64
	Offset int64
}

// TakeLost are p's parked records found gone that are still parked and
// were not read again since, by offset; it forgets them (the caller loses
// each, Lose, in the open transaction), and the floor no longer stops at
// them where the parked set p was read again from names them. (An abort
// rewinds p, which reads that set again and finds them again.)
func (k *Set[R]) TakeLost(p Part) []GoneSlot {
	offs := slices.Sorted(maps.Keys(k.gone.found[p]))
	delete(k.gone.found, p)
	out := make([]GoneSlot, 0, len(offs))
	for _, o := range offs {
		r, parked := k.slots[p][o]
		if _, in := k.mem[p][o]; !parked || in {
			continue
		}
		out = append(out, GoneSlot{Key: r.sk, Seq: r.seq, Offset: o})
		if k.gone.dropped[p] == nil {
			k.gone.dropped[p] = map[int64]bool{}
		}
		k.gone.dropped[p][o] = true
	}
	return out
}
