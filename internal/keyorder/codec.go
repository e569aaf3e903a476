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

// maxParked bounds what Decode accepts: a broker's metadata limit is a
// few KiB, so a larger count is not relay's.
const maxParked = 1 << 20

// Encode is p as offset metadata: the prefix, then base64url of
// uvarint(Hi-L), uvarint(len-1) and each later offset's gap from the one
// before, less one. Runs of settled records cost nothing; a parked record
// costs one byte while the gaps stay under 128.
func Encode(p Parked) (string, error) {
	if err := p.check(); err != nil {
		return "", err
	}
	l := p.Offsets[0]
	b := make([]byte, 0, 2*binary.MaxVarintLen64+len(p.Offsets))
	b = binary.AppendUvarint(b, uint64(p.Hi-l))
	b = binary.AppendUvarint(b, uint64(len(p.Offsets)-1))
	for i := 1; i < len(p.Offsets); i++ {
		b = binary.AppendUvarint(b, uint64(p.Offsets[i]-p.Offsets[i-1]-1))
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// EncodedLen is len(Encode(p)) without building it.
func EncodedLen(p Parked) int {
	n := uvarintLen(uint64(p.Hi-p.Offsets[0])) + uvarintLen(uint64(len(p.Offsets)-1))
	for i := 1; i < len(p.Offsets); i++ {
		n += uvarintLen(uint64(p.Offsets[i] - p.Offsets[i-1] - 1))
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
	if !ok1 || !ok2 || more >= maxParked || span > uint64(math.MaxInt64-offset) {
		return bad("truncated or out of range")
	}
	p.Hi = offset + int64(span)
	p.Offsets = make([]int64, 0, more+1)
	p.Offsets = append(p.Offsets, offset)
	for range more {
		gap, ok := next()
		last := p.Offsets[len(p.Offsets)-1]
		if !ok || gap > uint64(p.Hi-last) {
			return bad("truncated or out of range")
		}
		p.Offsets = append(p.Offsets, last+int64(gap)+1)
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
