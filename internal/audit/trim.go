package audit

import (
	"fmt"
	"slices"
)

// An end-state partition whose log starts past 0 lost its first records
// (time or size retention, DeleteRecords), and with them the end states
// they were. Which source offsets does that concern? Not those of a time:
// relay gives an output the source record's timestamp, so an end-state
// partition is not in time order. Its offsets are in processing order,
// though: relay writes a record's first end state in the transaction
// that consumes it, transactions of one partition one after another, in
// source order. So the first record left (at the log start) that relay
// wrote on first consumption names the boundary: every source offset
// below it had its end state before it, possibly deleted; every one above
// it was consumed after, and its end state — first try, tier or replay —
// was written after, and is still there.
//
// A record written after a retry (a tier's or a replay's) names an
// earlier offset and is no boundary: the first records left are kept in
// order (firstKept of them), and the boundary is the first of them whose
// source offset went through no tier, replay or ledger. None such, or no
// record left at all: every offset of the window may have lost its end
// state there.

// firstKept is how many source offsets a trimmed partition's first records
// name are kept to find its boundary.
const firstKept = 256

// trim is one end-state partition that lost records.
type trim struct {
	logStart int64
	firsts   []int64 // source offsets named by its first records left, in order
}

// named notes that a record of partition p of end-state topic topic names
// source offset off.
func (s *scan) named(topic string, p int32, off int64) {
	if t := s.trims[topic][p]; t != nil && len(t.firsts) < firstKept {
		t.firsts = append(t.firsts, off)
	}
}

// bound sets each partition's trimBelow from its trimmed end-state
// partitions, once everything was read.
func (s *scan) bound() {
	topics := make([]string, 0, len(s.trims))
	for topic := range s.trims {
		topics = append(topics, topic)
	}
	slices.Sort(topics)
	for _, topic := range topics {
		for p, t := range s.trims[topic] {
			pt := s.batch[p]
			if pt == nil {
				continue
			}
			b, why := s.boundary(pt, t)
			pt.trimBelow = max(pt.trimBelow, b)
			s.rep.Trimmed = append(s.rep.Trimmed, fmt.Sprintf("%s[%d]: records before offset %d deleted; %s", topic, p, t.logStart, why))
		}
	}
}

// boundary is the source offset below which t may have held end states of
// pt's records, and why.
func (s *scan) boundary(pt *part, t *trim) (int64, string) {
	for _, off := range t.firsts {
		if off >= pt.hi {
			return pt.hi, fmt.Sprintf("its first record left names source offset %d, past the window: any source offset of the window may have lost its end state there", off)
		}
		// Below the window, a record cannot be checked for retries: it
		// is taken for a first try.
		if _, sl := s.at(pt.p, off); sl == nil || *sl&retried == 0 {
			return off, fmt.Sprintf("source offsets below %d may have lost their end state there", off)
		}
	}
	return pt.hi, "no record left there marks where the deletion ends: any source offset of the window may have lost its end state there"
}
