package keyorder

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Parked is what a partition's commit says of its parked records: the
// committed offset is the lowest of them (Offsets[0]); Hi is the first
// offset not yet handled. Every offset in [Offsets[0], Hi) that is not in
// Offsets was settled in or before that commit, and must be skipped when
// the partition is read again.
type Parked struct {
	Offsets []int64 // ascending, at least one
	Hi      int64
}

// Prefix starts the offset metadata relay writes with a parked set, and
// names its format: metadata without it (another committer's, or none)
// carries no parked set.
const Prefix = "relay.park.1:"

// parkVersion is the version Prefix names; family starts every version's
// prefix, "relay.park.<version>:".
const (
	parkVersion = 1
	family      = "relay.park."
)

// newerFormat reports the version of metadata that is a parked set of a
// later format than this relay writes.
func newerFormat(metadata string) (int, bool) {
	rest, ok := strings.CutPrefix(metadata, family)
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ":")
	v, err := strconv.Atoi(num)
	if !ok || err != nil || v <= parkVersion || len(num) > 9 {
		return 0, false
	}
	return v, true
}

// MaxParked bounds a partition's parked set: CanPark parks no more on a
// partition, and Decode refuses a larger one as not relay's. A run of
// parked offsets costs a few bytes of metadata whatever its length, so
// the brokers' metadata limit does not bound the count; every parked
// record is kept in memory, and each park and commit reads the set.
const MaxParked = 1 << 16

// Encode is p as offset metadata: the prefix, then base64url of
// uvarint(Hi-L), uvarint(runs-1), and one entry per run of consecutive
// parked offsets: uvarint(g*2+r), where g is the run's gap from the one
// before less one (0 for the first run, which starts at L) and r is 1 for
// a run of two or more, then (when r is 1) uvarint(length-2). Runs of
// settled records cost nothing; an isolated parked record costs one byte
// while the gaps stay under 65, and a run of parked records (a stream of
// followers behind long-blocked keys) two or three bytes whatever its
// length.
func Encode(p Parked) (string, error) {
	if err := p.check(); err != nil {
		return "", err
	}
	b := make([]byte, 0, 2*binary.MaxVarintLen64+len(p.Offsets))
	b = binary.AppendUvarint(b, uint64(p.Hi-p.Offsets[0]))
	rs := runsOf(p.Offsets)
	b = binary.AppendUvarint(b, uint64(len(rs)-1))
	for _, r := range rs {
		b = binary.AppendUvarint(b, r.entry())
		if r.length > 1 {
			b = binary.AppendUvarint(b, uint64(r.length-2))
		}
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// run is a run of consecutive parked offsets: its gap from the run before
// less one (0 for the first) and its length.
type run struct{ gap, length int64 }

func (r run) entry() uint64 {
	e := uint64(r.gap) << 1
	if r.length > 1 {
		e |= 1
	}
	return e
}

// runsOf cuts ascending offsets into runs of consecutive ones.
func runsOf(offsets []int64) []run {
	var rs []run
	for i := 0; i < len(offsets); {
		j := i + 1
		for j < len(offsets) && offsets[j] == offsets[j-1]+1 {
			j++
		}
		r := run{length: int64(j - i)}
		if i > 0 {
			r.gap = offsets[i] - offsets[i-1] - 2
		}
		rs = append(rs, r)
		i = j
	}
	return rs
}

// EncodedLen is len(Encode(p)) without building it.
func EncodedLen(p Parked) int {
	rs := runsOf(p.Offsets)
	n := uvarintLen(uint64(p.Hi-p.Offsets[0])) + uvarintLen(uint64(len(rs)-1))
	for _, r := range rs {
		n += uvarintLen(r.entry())
		if r.length > 1 {
			n += uvarintLen(uint64(r.length - 2))
		}
	}
	return len(Prefix) + base64.RawURLEncoding.EncodedLen(n)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func (p Parked) check() error {
	if len(p.Offsets) == 0 {
		return errors.New("no parked offset")
	}
	if p.Offsets[0] < 0 {
		return fmt.Errorf("parked offset %d", p.Offsets[0])
	}
	for i := 1; i < len(p.Offsets); i++ {
		if p.Offsets[i] <= p.Offsets[i-1] {
			return fmt.Errorf("parked offsets not ascending: %d after %d", p.Offsets[i], p.Offsets[i-1])
		}
	}
	if last := p.Offsets[len(p.Offsets)-1]; p.Hi <= last {
		return fmt.Errorf("handled position %d not above the last parked offset %d", p.Hi, last)
	}
	return nil
}

// Decode reads the parked set of a partition committed at offset with
// metadata. ok is false when the metadata carries none (not relay's
// prefix); an error names metadata that has the prefix and cannot be
// read, which must not be taken for "nothing parked".
func Decode(offset int64, metadata string) (p Parked, ok bool, err error) {
	rest, found := strings.CutPrefix(metadata, Prefix)
	if !found {
		if v, newer := newerFormat(metadata); newer {
			return Parked{}, true, &NewerError{What: fmt.Sprintf("the parked set committed with offset %d", offset), Version: v, Reads: parkVersion}
		}
		return Parked{}, false, nil
	}
	bad := func(why string) (Parked, bool, error) {
		return Parked{}, true, fmt.Errorf("offset metadata %.40q of offset %d: %s", metadata, offset, why)
	}
	if offset < 0 {
		return bad("no committed offset")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil {
		return bad("not base64url")
	}
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	span, ok1 := next()
	more, ok2 := next()
	if !ok1 || !ok2 || more >= MaxParked || span > uint64(math.MaxInt64-offset) {
		return bad("truncated or out of range")
	}
	p.Hi = offset + int64(span)
	p.Offsets = make([]int64, 0, more+1)
	prev := offset - 1 // the last offset of the run before (none yet)
	for i := range more + 1 {
		e, ok := next()
		if !ok {
			return bad("truncated or out of range")
		}
		gap, length := e>>1, uint64(1)
		if e&1 == 1 {
			l, ok := next()
			if !ok || l > MaxParked {
				return bad("truncated or out of range")
			}
			length = l + 2
		}
		// The run starts at prev+1 (the first, at the committed offset)
		// or prev+gap+2, below Hi, and ends below Hi too; checked without
		// overflow.
		room := uint64(p.Hi - prev) // prev < Hi: at least 1
		skip := uint64(1)
		if i > 0 {
			skip = gap + 2
		}
		if i == 0 && gap != 0 || gap > room || skip >= room || length > room-skip || length > uint64(MaxParked-len(p.Offsets)) {
			return bad("truncated or out of range")
		}
		start := prev + int64(skip)
		for o := start; o < start+int64(length); o++ {
			p.Offsets = append(p.Offsets, o)
		}
		prev = start + int64(length) - 1
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	if err := p.check(); err != nil {
		return bad(err.Error())
	}
	return p, true, nil
}

// Settled reports whether offset o was settled by the commit p came
// from: handled (below Hi), at or above the committed offset, and not
// parked. Such a record is skipped when the partition is read again.
func (p Parked) Settled(o int64) bool {
	if len(p.Offsets) == 0 || o <= p.Offsets[0] || o >= p.Hi {
		return false
	}
	_, parked := slices.BinarySearch(p.Offsets, o)
	return !parked
}

// Holds reports whether offset o is parked in p.
func (p Parked) Holds(o int64) bool {
	_, ok := slices.BinarySearch(p.Offsets, o)
	return ok
}
