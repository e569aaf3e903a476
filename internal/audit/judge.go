package audit

import (
	"fmt"
	"maps"
	"slices"
)

// finish ends the report, once every batch was judged.
func (s *scan) finish() {
	if s.unprinted > 0 {
		s.rep.Notes = append(s.rep.Notes, fmt.Sprintf("%d of relay's records carry no relay.source.fingerprint (written by an earlier relay): credited to the source offset they name without checking it is theirs (--allow-unfingerprinted)", s.unprinted))
	}
	s.rep.finish()
}

// judge gives every offset of the batch's windows its verdict.
func (s *scan) judge() {
	for _, p := range slices.Sorted(maps.Keys(s.batch)) {
		pt := s.batch[p]
		pr := s.rep.partition(pt)
		pt.cursor = pt.hi
		for i, sl := range pt.slots {
			off := pt.base + int64(i)
			consumed := pt.committed >= 0 && (off < pt.committed || pt.parked.Settled(off))
			parked := pt.committed >= 0 && pt.parked.Holds(off)
			deleted := off < pt.trimBelow
			v, why := judge(sl, consumed, parked, deleted, s.sourceCompacted)
			if inFlight(v) && sl&stuck == 0 && pt.cursor == pt.hi {
				pt.cursor = off // the first not judged final holds the cursor
			}
			pr.count(v, sl.state(), sl&present != 0)
			if v == Phantom {
				s.rep.Misrouted++
			}
			if k := kindOf(v); k != "" {
				if v == Duplicated && sl.count(outShift) > 1 {
					continue // noted, with the copy's coordinates, when read
				}
				s.note(k, &Coord{Topic: s.source, Partition: p, Offset: off}, Coord{}, why)
			}
		}
		pr.Cursor = pt.cursor
		if n := min(pt.logStart, pt.hi) - pt.lo; n > 0 {
			pr.Unverifiable += n
			s.note(KindUnverifiable, &Coord{Topic: s.source, Partition: p, Offset: pt.lo}, Coord{},
				fmt.Sprintf("%d source records, offsets %d to %d, were deleted by retention before the audit: nothing can be said of them", n, pt.lo, pt.lo+n-1))
		}
	}
}

// note counts a finding, and keeps it with its coordinates while there
// is room.
func (s *scan) note(k Kind, src *Coord, at Coord, why string) {
	s.rep.note(k, src, at, why, s.o.MaxFindings)
}
