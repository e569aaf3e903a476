package audit

import (
	"fmt"

	"relay/internal/ledger"
)

// slot is the compact state of one source offset: what the scan saw for
// it. Counts saturate at 3: two is already a finding.
type slot uint32

const (
	outShift    = 0 // outputs with its relay.message.id (2 bits)
	rejShift    = 2 // rejected records (2 bits)
	quarShift   = 4 // quarantine records (2 bits)
	tierFlight  = slot(1) << 6
	replFlight  = slot(1) << 7
	present     = slot(1) << 8 // a committed source record is at this offset
	ledgerShift = 9            // the ledger's current (replay count, rank): 3 bits of rank, 8 of count
	countMask   = slot(3)
	// retried: a copy went through a tier or the replay topic, a
	// rejected or quarantine record was written after an attempt, or
	// the ledger moved past open (see trim).
	retried = slot(1) << 20
	// stuck: the record was reported stuck (once, whatever number of
	// its copies are in flight).
	stuck = slot(1) << 21
)

func (s slot) count(shift uint) int { return int((s >> shift) & countMask) }

func (s *slot) add(shift uint) {
	if s.count(shift) < 3 {
		*s += 1 << shift
	}
}

// rankOf numbers a ledger state for the slot (1 to 5; 0: none).
func rankOf(st ledger.State) slot {
	switch st {
	case ledger.Open:
		return 1
	case ledger.Replaying:
		return 2
	case ledger.FailedAgain:
		return 3
	case ledger.Discarded:
		return 4
	case ledger.Resolved:
		return 5
	}
	return 0
}

var stateOfRank = [...]ledger.State{1: ledger.Open, 2: ledger.Replaying, 3: ledger.FailedAgain, 4: ledger.Discarded, 5: ledger.Resolved}

// ledgered sets the ledger's state of the failure at this offset, as
// ledger.Fold gives it (see foldLedger).
func (s *slot) ledgered(st ledger.State, replayCount int) {
	r := rankOf(st)
	if r == 0 {
		return
	}
	if st != ledger.Open || replayCount > 0 {
		*s |= retried
	}
	v := slot(min(replayCount, 255))<<3 | r
	*s = *s&^(0x7ff<<ledgerShift) | v<<ledgerShift
}

// state is the ledger's current state for the offset; "" without one.
func (s slot) state() ledger.State {
	r := (s >> ledgerShift) & 7
	if r == 0 || int(r) >= len(stateOfRank) {
		return ""
	}
	return stateOfRank[r]
}

// Verdict is what the audit says of one source offset.
type Verdict int

// Verdicts. Processed, Rejected and Quarantined are end states; the
// InFlight ones are not judged yet; Lost, Duplicated and Unverifiable are
// findings (Misrouted ones concern derived records, see Finding).
const (
	Gone         Verdict = iota // no committed record at this offset (aborted, a marker)
	Processed                   // one output, nothing else
	Rejected                    // one rejected record, nothing else
	Quarantined                 // quarantined; the ledger says where it stands
	NotConsumed                 // at or above the group's committed offset
	InTier                      // its latest copy waits in a retry tier
	InReplay                    // its latest copy waits in the replay topic
	Parked                      // parked by key ordering: handled at its key's turn
	Lost                        // consumed, no end state, no copy anywhere
	Duplicated                  // more than one end state
	Unverifiable                // the evidence may have been deleted
	Phantom                     // relay's records name an offset without a committed source record
	verdicts
)

var verdictNames = [verdicts]string{"gone", "processed", "rejected", "quarantined", "not consumed", "in a tier", "replaying", "parked",
	"lost", "duplicated", "unverifiable", "phantom"}

func (v Verdict) String() string { return verdictNames[v] }

// judge gives the verdict on one offset. consumed says the offset is below
// the group's committed offset at the cut, or settled above it (the
// commit's parked set says so); parked says the commit parks it; deleted says evidence of an end
// state may have been deleted (an end-state partition lost records to
// retention or compaction); gaps says the source is compacted, so an
// offset without a committed record may have lost it. detail says why,
// for findings.
func judge(s slot, consumed, parked, deleted, gaps bool) (v Verdict, detail string) {
	outs, rejs, quars := s.count(outShift), s.count(rejShift), s.count(quarShift)
	st := s.state()
	if s&present == 0 {
		switch {
		case s&^present == 0 && gaps:
			return Unverifiable, "no committed source record at this offset, and the source is compacted: it may have been deleted"
		case s&^present == 0:
			return Gone, ""
		case gaps:
			return Unverifiable, "relay's records name this offset, where the compacted source has no record left"
		}
		return Phantom, "relay's records name this offset, where no committed source record is (an aborted record or a transaction marker): an end state of a record that was never committed"
	}
	switch {
	case parked && outs+rejs > 1:
		// One end state may have been written after the cut, when
		// relay handled the record at its key's turn; two cannot.
		return Duplicated, fmt.Sprintf("parked at the cut, and yet %d outputs and %d rejected records", outs, rejs)
	case parked && outs+rejs == 1 && (quars > 0 || st != "") && st != ledger.Resolved:
		// Its turn writes one end state; a quarantine beside an output
		// is one too many unless a replay resolved it.
		return Duplicated, fmt.Sprintf("parked at the cut, and yet quarantined (%s) and also output or rejected", orOpen(st))
	case parked:
		return Parked, ""
	case !consumed:
		return NotConsumed, ""
	case outs > 1:
		return Duplicated, fmt.Sprintf("%d outputs with its relay.message.id", outs)
	case rejs > 1:
		return Duplicated, fmt.Sprintf("%d rejected records", rejs)
	case outs+rejs > 1:
		return Duplicated, "both an output and a rejected record"
	case s&replFlight != 0:
		return InReplay, ""
	case s&tierFlight != 0:
		return InTier, ""
	case quars > 0 || st != "":
		return quarantined(outs+rejs, quars, st, deleted)
	case outs == 1:
		return Processed, ""
	case rejs == 1:
		return Rejected, ""
	case deleted:
		return Unverifiable, "no end state found, and records of its derived partitions were deleted"
	}
	return Lost, "below the group's committed offset, with no output, rejected or quarantine record, no ledger entry and no copy in a tier or the replay topic"
}

// quarantined judges an offset that reached the quarantine, or whose
// ledger says it did: settled says how many outputs and rejected records
// it has (at most one here), quars how many quarantine records. No copy
// of it is in flight.
func quarantined(settled, quars int, st ledger.State, deleted bool) (Verdict, string) {
	switch {
	case st == ledger.Resolved && settled == 0 && deleted:
		return Unverifiable, "the ledger says resolved; its output may have been deleted"
	case st == ledger.Resolved && settled == 0:
		return Lost, "the ledger says resolved by a replay, but no output or rejected record of it was found"
	case st != ledger.Resolved && settled > 0:
		return Duplicated, fmt.Sprintf("quarantined (%s) and also output or rejected", orOpen(st))
	case st == ledger.Open && quars > 1:
		// Only a replay that failed again quarantines a record a second
		// time, and its ledger change (failed-again) is written with it.
		return Duplicated, fmt.Sprintf("%d quarantine records, and the ledger says open: no replay of it failed again", quars)
	case st == ledger.Replaying && deleted:
		return Unverifiable, "the ledger says replaying, no copy waits in the replay topic or a tier, and its end state may have been deleted"
	case st == ledger.Replaying:
		return Lost, "the ledger says replaying, but no copy waits in the replay topic or a tier (the replay topic's committed offset is past it), and the replay left no output, rejected or quarantine record"
	case quars == 0 && settled == 0 && !deleted:
		// A ledger change alone is no end state: the quarantine,
		// replay and console principals may write one (a discard) for
		// any record. It attaches to a quarantine record of this source
		// record, fingerprinted, or to nothing.
		return Lost, fmt.Sprintf("the ledger says %s, but no quarantine record of it was found, and the quarantine lost no record to retention: a ledger change attached to no quarantine record is no end state", st)
	case quars == 0 && settled == 0:
		return Unverifiable, fmt.Sprintf("the ledger says %s; its quarantine record may have been deleted by retention", st)
	}
	return Quarantined, ""
}

// orOpen is st, or open for a quarantine record whose ledger entry is
// missing (written before relay kept a ledger, or not yet compacted in).
func orOpen(st ledger.State) ledger.State {
	if st == "" {
		return ledger.Open
	}
	return st
}
