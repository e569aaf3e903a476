package keyorder

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestMetadataSizeIssueWorkload measures, on a simulation of the
// workload key ordering is judged by (250 records/s over 200 keys, 3 % of
// the records that reach the hook failing twice, tiers 2 s and 5 s), how
// long the parked set a commit would carry is: every 100 ms, on each
// partition, the offsets parked between the lowest parked one and the
// handled position. A follower of a key whose head waits in a tier is
// parked until the head comes back and succeeds. It must stay well inside
// the broker's default offset.metadata.max.bytes (4096), less room for
// the rest of the commit, on every partition, at every commit; the
// distribution is logged for docs/PERFORMANCE.md.
func TestMetadataSizeIssueWorkload(t *testing.T) {
	const budget = 4096 - 64
	for _, partitions := range []int{1, 3, 6} {
		sizes, parked := simulate(partitions, 30_000, 250, 200, 0.03, 7*time.Second, 42)
		slices.Sort(sizes)
		slices.Sort(parked)
		q := func(s []int, f float64) int { return s[min(len(s)-1, int(f*float64(len(s))))] }
		t.Logf("%d partitions, %d commits: metadata chars p50 %d p99 %d p99.9 %d max %d; parked records p50 %d p99.9 %d max %d",
			partitions, len(sizes), q(sizes, .5), q(sizes, .99), q(sizes, .999), sizes[len(sizes)-1], q(parked, .5), q(parked, .999), parked[len(parked)-1])
		if m := sizes[len(sizes)-1]; m > budget {
			t.Errorf("%d partitions: a commit's metadata of %d chars is over the budget of %d", partitions, m, budget)
		}
	}
}

// TestMetadataSizeDefaultTiers is the same workload at 300 records/s
// with relay's default first tier (30 s): nearly every key is blocked
// nearly all the time, and nearly every record is a parked follower. Runs
// of parked offsets cost a few bytes each, so the parked set stays inside
// the budget (a gap per offset, as the first encoding had, went over it
// and copied half the stream into the tier).
func TestMetadataSizeDefaultTiers(t *testing.T) {
	const budget = 4096 - 64
	for _, partitions := range []int{1, 3} {
		sizes, parked := simulate(partitions, 20_000, 300, 200, 0.03, 31*time.Second, 7)
		slices.Sort(sizes)
		slices.Sort(parked)
		t.Logf("%d partitions, %d commits: metadata chars max %d; parked records max %d", partitions, len(sizes), sizes[len(sizes)-1], parked[len(parked)-1])
		if m := sizes[len(sizes)-1]; m > budget {
			t.Errorf("%d partitions: a commit's metadata of %d chars is over the budget of %d", partitions, m, budget)
		}
	}
}

// simulate runs n records at rate/s over keys; a record whose key is not
// blocked fails its first two tries with probability fail and blocks its
// key for hold. It returns, for every partition at every 100 ms commit
// with something parked, the metadata's length and the parked count.
func simulate(partitions, n, rate, keys int, fail float64, hold time.Duration, seed uint64) (sizes, parked []int) {
	r := rand.New(rand.NewPCG(seed, 1))
	type rec struct {
		offset  int64
		at      time.Duration
		release time.Duration // parked until then; 0: settled on arrival
	}
	parts := make([][]rec, partitions)
	blocked := map[int]time.Duration{}
	for i := range n {
		at := time.Duration(i) * time.Second / time.Duration(rate)
		k := r.IntN(keys)
		h := fnv.New32a()
		_, _ = fmt.Fprint(h, k)
		p := int(h.Sum32()) % partitions
		x := rec{offset: int64(len(parts[p])), at: at}
		switch until, ok := blocked[k]; {
		case ok && at < until:
			x.release = until // a follower: parked behind its head
		case r.Float64() < fail:
			blocked[k] = at + hold // a head: to the tiers, its key blocked
		}
		parts[p] = append(parts[p], x)
	}
	end := time.Duration(n) * time.Second / time.Duration(rate)
	for now := 100 * time.Millisecond; now <= end+hold; now += 100 * time.Millisecond {
		for _, recs := range parts {
			var ps Parked
			for _, x := range recs {
				if x.at > now {
					break
				}
				ps.Hi = x.offset + 1
				if x.release > now {
					ps.Offsets = append(ps.Offsets, x.offset)
				}
			}
			if len(ps.Offsets) > 0 {
				sizes = append(sizes, EncodedLen(ps))
				parked = append(parked, len(ps.Offsets))
			}
		}
	}
	return sizes, parked
}
