package audit

import (
	"fmt"
	"maps"
	"slices"
)

// perOffset is the audit's memory per source offset of a window: its
// slot and its fingerprint's 16 bits.
const perOffset = 6

// perFailure is the audit's memory per quarantined failure of a batch
// (its ledger.Reduced, 40 bytes, in a map keyed by source offset): 133
// bytes measured at a million failures. A batch's failures have a budget
// of their own, --max-memory again: a million failures in one batch
// need --max-memory 127MiB; more are no verdict (exit 3), never an
// out-of-memory kill.
const perFailure = 133

// maxFailures is how many failures one batch's ledger may hold.
func (s *scan) maxFailures() int {
	m := int64(DefaultMaxMemory)
	if s.o != nil && s.o.MaxMemory > 0 {
		m = s.o.MaxMemory
	}
	return int(m / perFailure)
}

// failuresFit is the error of a batch whose failures passed maxFailures.
func (s *scan) failuresFit() error {
	if !s.tooManyFailures {
		return nil
	}
	return fmt.Errorf("the window of partitions %v holds more than %d quarantined failures, more than --max-memory holds at %d bytes each: raise --max-memory (and the memory limit with it), or audit fewer partitions or a narrower window at a time",
		slices.Sorted(maps.Keys(s.batch)), s.maxFailures(), perFailure)
}

// DefaultMaxMemory bounds the per-offset state held at once: partitions
// are audited in batches that fit it. The default leaves room, in the
// chart's 320 MiB limit, for the Go runtime, librdkafka's fetch buffers
// and the ledger changes of the batch's failures (peak RSS 228 MiB over
// 20 million source records, docs/PERFORMANCE.md).
const DefaultMaxMemory = 96 << 20

// heapLimit is the Go heap's soft limit (GOMEMLIMIT, when set, wins) for
// an audit whose per-offset state is bounded by maxMemory: that state, a
// quarter more for what a batch reads beside it (records in hand, the
// failures' ledger states, which have a budget of their own: a batch with
// many is over the soft limit, and the collector runs more often), and
// 48 MiB for the runtime. Without it the collector lets
// the heap grow to twice the live state: 257 MiB at 20 million offsets,
// against 228 MiB with it. librdkafka's buffers are C memory, outside it.
func heapLimit(maxMemory int64) int64 { return maxMemory + maxMemory/4 + 48<<20 }

// batches splits the window's partitions, in order, into batches whose
// state fits o.MaxMemory; a partition whose window alone does not fit is
// an error naming the flag.
func (s *scan) batches() ([][]int32, error) {
	ps := slices.Sorted(maps.Keys(s.parts))
	var out [][]int32
	var cur []int32
	var used int64
	for _, p := range ps {
		pt := s.parts[p]
		need := (pt.hi - pt.base) * perOffset
		if need > s.o.MaxMemory {
			return nil, fmt.Errorf("%s[%d]: the window holds %d offsets, %d MiB of audit state, more than --max-memory (%d MiB): narrow the window (--from/--to, --from-offsets/--to-offsets) or raise --max-memory and the memory limit with it",
				s.source, p, pt.hi-pt.base, need>>20, s.o.MaxMemory>>20)
		}
		if used+need > s.o.MaxMemory && len(cur) > 0 {
			out, cur, used = append(out, cur), nil, 0
		}
		cur, used = append(cur, p), used+need
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out, nil
}
