package replay

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	"relay/internal/ledger"
	"relay/internal/quarantine"
)

// Selection is what a replay acts on.
type Selection struct {
	Records []*quarantine.Failure
	Skipped map[string]int // reason → count
	Bytes   int
}

// chooseFrom applies the selection of o (checked) to a snapshot, its
// skips added to skipped's (nil: none): settled, in-flight and expired
// failures are skipped and counted. The records come in source order
// (topic, partition, offset), so a key's records are replayed in their
// order. Explicit ids are checked on the index, by chooseIDs.
func chooseFrom(s *quarantine.Snapshot, o *Options, now time.Time, skipped map[string]int) *Selection {
	sel := &Selection{Skipped: map[string]int{}}
	for why, n := range skipped {
		sel.Skipped[why] += n
	}
	for _, fl := range s.Failures {
		if !o.filter.Match(fl, now) {
			continue
		}
		if why := skip(fl, o, o.filter.IDs[fl.ID], s.Kept); why != "" {
			sel.Skipped[why]++
			continue
		}
		sel.Records = append(sel.Records, fl)
		sel.Bytes += fl.Record.ValueLen
	}
	sort.Slice(sel.Records, func(i, j int) bool {
		a, b := sel.Records[i].Source, sel.Records[j].Source
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Offset < b.Offset
	})
	return sel
}

// chooseIDs is Choose on an index, which holds no record's bytes: the
// ids of the failures it selects, and the skips.
func chooseIDs(x *quarantine.Index, o *Options, now time.Time) (ids map[string]bool, skipped map[string]int, err error) {
	if err := missing(o, func(id string) bool { return x.Get(id) != nil }); err != nil {
		return nil, nil, err
	}
	ids, skipped = map[string]bool{}, map[string]int{}
	x.Each(func(fl *quarantine.Failure) bool {
		if !o.filter.Match(fl, now) {
			return true
		}
		if why := skip(fl, o, o.filter.IDs[fl.ID], false); why != "" {
			skipped[why]++
		} else {
			ids[fl.ID] = true
		}
		return true
	})
	return ids, skipped, nil
}

// missing names the explicit ids that exists says are in neither the
// ledger nor a quarantine topic.
func missing(o *Options, exists func(id string) bool) error {
	var errs []error
	for id := range o.filter.IDs {
		if !exists(id) {
			errs = append(errs, fmt.Errorf("%s: not in the ledger nor in a quarantine topic", id))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &quarantine.InputError{Err: err}
	}
	return nil
}

// skip says why a matching failure is not replayed, or "". kept says the
// failures come from a snapshot that keeps the selected records' bytes.
func skip(fl *quarantine.Failure, o *Options, explicit, kept bool) string {
	switch {
	case fl.State == ledger.Resolved:
		return "already resolved"
	case fl.State == ledger.Discarded:
		return "discarded"
	case fl.State == ledger.Replaying && !o.IncludeReplaying:
		return "being replayed"
	case fl.State == ledger.FailedAgain && !explicit && !o.IncludeFailedAgain:
		return "failed again (add --include-failed-again)"
	case fl.Record == nil:
		return "record gone (retention)"
	case fl.Record.Damaged != nil:
		return "envelope unreadable (see quarantine show)"
	case kept && !fl.Record.Kept:
		// Quarantined (again) between the command's two reads.
		return "changed while the replay started; run it again"
	}
	return ""
}

// Sample splits records into a deterministic sample of about n records and
// the rest. It picks whole keys (by a hash of source topic, partition and
// key), so a key's records never straddle the two phases; both keep
// source order.
func Sample(records []*quarantine.Failure, n int) (first, rest []*quarantine.Failure) {
	if n <= 0 || n >= len(records) {
		return records, nil
	}
	hash := map[string]uint64{}
	var groups []string
	size := map[string]int{}
	for _, fl := range records {
		g := keyGroup(fl)
		if _, ok := hash[g]; !ok {
			h := fnv.New64a()
			_, _ = h.Write([]byte(g))
			hash[g] = h.Sum64()
			groups = append(groups, g)
		}
		size[g]++
	}
	sort.Slice(groups, func(i, j int) bool { return hash[groups[i]] < hash[groups[j]] })
	chosen := map[string]bool{}
	taken := 0
	for _, g := range groups {
		if taken >= n {
			break
		}
		chosen[g] = true
		taken += size[g]
	}
	for _, fl := range records {
		if chosen[keyGroup(fl)] {
			first = append(first, fl)
		} else {
			rest = append(rest, fl)
		}
	}
	return first, rest
}

// keyGroup is what a sample takes whole: the records of one key of one
// source partition (a record without a key is alone).
func keyGroup(fl *quarantine.Failure) string {
	if fl.Record.Key == nil {
		return "id|" + fl.ID
	}
	return fl.Source.Topic + "|" + strconv.Itoa(int(fl.Source.Partition)) + "|" + string(fl.Record.Key)
}

// Skips renders skip counts for a summary line: "; skipped: a 1, b 2".
func Skips(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return "; skipped: " + strings.Join(parts, ", ")
}
