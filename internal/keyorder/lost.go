package keyorder

import "slices"

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
	// TakeLost.
	found map[Part][]int64
}

func (g *gone) init() {
	g.await = map[Part][]int64{}
	g.stale = map[Part]bool{}
	g.found = map[Part][]int64{}
}

func (g *gone) forget(partitions []int32) {
	for _, m := range []map[Part][]int64{g.await, g.found} {
		for p := range m {
			if slices.Contains(partitions, p.Partition) {
				delete(m, p)
			}
		}
	}
	for p := range g.stale {
		if slices.Contains(partitions, p.Partition) {
			delete(g.stale, p)
		}
	}
}

// rereads notes that p is read again from its commit: every parked record
// of p is to be read again, and what was found gone before is found again
// or not.
func (k *Set[R]) rereads(p Part) {
	k.gone.stale[p] = true
	delete(k.gone.found, p)
	delete(k.gone.await, p)
}

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
	for o := range k.slots[p] {
		if _, in := k.mem[p][o]; !in {
			offs = append(offs, o)
		}
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
// back): a parked record below it that was not read again is gone.
func (k *Set[R]) Passed(p Part, offset int64) {
	if k.gone.await == nil {
		return // nothing was ever parked or restored
	}
	k.passBelow(p, offset, offset+1)
}

// Trimmed is p's log starting at start: a parked record below it that
// was not read again is gone.
func (k *Set[R]) Trimmed(p Part, start int64) {
	if k.gone.await == nil {
		return
	}
	k.passBelow(p, start, start)
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
	if !slices.Contains(k.gone.found[p], offset) {
		k.gone.found[p] = append(k.gone.found[p], offset)
	}
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
		out[p] = slices.Min(offs)
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
// each, Lose, in the open transaction), and so does the parked set p was
// read again from: its floor no longer stops at them. (An abort rewinds
// p, which reads that set again.)
func (k *Set[R]) TakeLost(p Part) []GoneSlot {
	offs := k.gone.found[p]
	delete(k.gone.found, p)
	slices.Sort(offs)
	out := make([]GoneSlot, 0, len(offs))
	for _, o := range offs {
		r, parked := k.slots[p][o]
		if _, in := k.mem[p][o]; !parked || in {
			continue
		}
		out = append(out, GoneSlot{Key: r.sk, Seq: r.seq, Offset: o})
	}
	if w, ok := k.windows[p]; ok && len(out) > 0 {
		w.Offsets = slices.DeleteFunc(slices.Clone(w.Offsets), func(o int64) bool {
			return slices.ContainsFunc(out, func(g GoneSlot) bool { return g.Offset == o })
		})
		k.windows[p] = w
	}
	return out
}
