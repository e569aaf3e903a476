package keyorder

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// Encode and Decode round-trip every parked set, and EncodedLen is the
// length Encode writes.
func FuzzParkedCodec(f *testing.F) {
	f.Add(int64(0), []byte{0}, uint16(1))
	f.Add(int64(1_000_000), []byte{3, 0, 200, 1}, uint16(10_000))
	f.Add(int64(math.MaxInt64-10), []byte{1, 1}, uint16(3))
	f.Fuzz(func(t *testing.T, l int64, gaps []byte, tail uint16) {
		if l < 0 || len(gaps) > 4000 {
			return
		}
		p := Parked{Offsets: []int64{l}}
		for _, g := range gaps {
			last := p.Offsets[len(p.Offsets)-1]
			if last > math.MaxInt64-int64(g)-2 {
				return
			}
			p.Offsets = append(p.Offsets, last+int64(g)+1)
		}
		last := p.Offsets[len(p.Offsets)-1]
		if last > math.MaxInt64-int64(tail)-1 {
			return
		}
		p.Hi = last + int64(tail) + 1
		s, err := Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != EncodedLen(p) {
			t.Fatalf("EncodedLen %d, Encode wrote %d", EncodedLen(p), len(s))
		}
		got, ok, err := Decode(l, s)
		if !ok || err != nil || got.Hi != p.Hi || !slices.Equal(got.Offsets, p.Offsets) {
			t.Fatalf("%+v -> %q -> %+v %v %v", p, s, got, ok, err)
		}
	})
}

// Decode never panics, takes nothing without relay's prefix for a parked
// set, refuses (naming it) anything with the prefix that is not one, and
// refuses a parked set of a newer format (relay.park.N: above its own).
func FuzzDecodeAnything(f *testing.F) {
	good, _ := Encode(Parked{Offsets: []int64{5, 7, 9}, Hi: 12})
	for _, s := range []string{good, "", "relay.park.1:", Prefix + "!!", Prefix + "AA", "someone else's", good + "A"} {
		f.Add(int64(5), s)
	}
	f.Add(int64(math.MaxInt64-5), Prefix+"BQEACwM")
	f.Fuzz(func(t *testing.T, offset int64, metadata string) {
		p, ok, err := Decode(offset, metadata)
		_, newer := newerFormat(metadata)
		var ne *NewerError
		switch {
		case newer:
			if !ok || !errors.As(err, &ne) {
				t.Fatalf("%q (a newer format) read as ok %v, %v", metadata, ok, err)
			}
		case !strings.HasPrefix(metadata, Prefix):
			if ok || err != nil {
				t.Fatalf("%q taken as relay's: %v", metadata, err)
			}
		case err == nil:
			if p.check() != nil || p.Offsets[0] != offset {
				t.Fatalf("%q read as %+v", metadata, p)
			}
		}
	})
}

// Malformed metadata is an error, not an empty parked set.
func TestDecodeRefusesMalformed(t *testing.T) {
	good, _ := Encode(Parked{Offsets: []int64{5, 7, 9}, Hi: 12})
	for _, bad := range []string{Prefix, Prefix + "%%%", good[:len(good)-1], good + "AA", Prefix + "_____w"} {
		if _, ok, err := Decode(5, bad); !ok || err == nil {
			t.Errorf("%q: ok=%v err=%v", bad, ok, err)
		}
	}
	if _, ok, err := Decode(-1, good); !ok || err == nil {
		t.Errorf("no committed offset: ok=%v err=%v", ok, err)
	}
	// A few bytes that claim a run longer than MaxParked (anyone with
	// Read on the group can commit metadata), and a gap that would carry
	// a run past the end of the offsets (near MaxInt64).
	huge := Prefix + base64.RawURLEncoding.EncodeToString(binary.AppendUvarint(binary.AppendUvarint(
		binary.AppendUvarint(binary.AppendUvarint(nil, 1<<40), 0), 1), MaxParked))
	if _, ok, err := Decode(5, huge); !ok || err == nil {
		t.Errorf("a run of %d offsets in %d characters: ok=%v err=%v", MaxParked+2, len(huge), ok, err)
	}
	if _, ok, err := Decode(math.MaxInt64-5, Prefix+"BQEACwM"); !ok || err == nil {
		t.Errorf("a run past MaxInt64: ok=%v err=%v", ok, err)
	}
	at := Parked{Offsets: make([]int64, MaxParked), Hi: MaxParked}
	for i := range at.Offsets {
		at.Offsets[i] = int64(i)
	}
	if s, err := Encode(at); err != nil {
		t.Fatal(err)
	} else if p, ok, err := Decode(0, s); !ok || err != nil || len(p.Offsets) != MaxParked {
		t.Errorf("a parked set of MaxParked: %d offsets, %v, %v", len(p.Offsets), ok, err)
	}
	for _, bad := range []Parked{{}, {Offsets: []int64{3, 3}, Hi: 9}, {Offsets: []int64{3}, Hi: 3}, {Offsets: []int64{-1}, Hi: 3}} {
		if _, err := Encode(bad); err == nil {
			t.Errorf("%+v encoded", bad)
		}
	}
}

// A parked set of a later format (relay.park.2:, written by a newer relay)
// is refused with a *NewerError, never read as "nothing parked":
// that would read its records again above the committed offset. Metadata
// that only looks like the family (no version number, version 0) is not a
// parked set, as any other committer's metadata.
func TestDecodeRefusesANewerFormat(t *testing.T) {
	for _, md := range []string{"relay.park.2:AAA", "relay.park.17:", "relay.park.2:" + strings.Repeat("x", 100)} {
		_, ok, err := Decode(5, md)
		var newer *NewerError
		if !ok || !errors.As(err, &newer) || newer.Version <= 1 || newer.Reads != 1 || !strings.Contains(err.Error(), "offset 5") {
			t.Errorf("%q: ok=%v err=%v, want a NewerError naming offset 5", md, ok, err)
		}
	}
	for _, md := range []string{"relay.park.x:AAA", "relay.park.0:AAA", "relay.park.2", "relay.parking", "relay.park.99999999999:"} {
		if _, ok, err := Decode(5, md); ok || err != nil {
			t.Errorf("%q: ok=%v err=%v, want no parked set", md, ok, err)
		}
	}
}

// What a new owner skips: the offsets between the committed one and the
// handled position that are not parked.
func TestSettled(t *testing.T) {
	p := Parked{Offsets: []int64{10, 13, 14}, Hi: 17}
	var skipped []int64
	for o := int64(8); o < 20; o++ {
		if p.Settled(o) {
			skipped = append(skipped, o)
		}
	}
	if want := []int64{11, 12, 15, 16}; !slices.Equal(skipped, want) {
		t.Fatalf("skipped %v, want %v", skipped, want)
	}
}
