package schema

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"relay/internal/config"
	"relay/internal/tiers"
)

const (
	v1 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`
	v2 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long","default":0}]}`
	v3 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long","default":0},{"name":"currency","type":"string","default":"EUR"}]}`
)

type env struct {
	reg           *fakeRegistry
	client        *Client
	ids           []int // by version-1
	other         int   // v1 text under another subject only? (same text gets its own id here)
	subject       string
	readerVersion int
}

func setup(t *testing.T, accept string, readerVersion int) (*env, *Admitter) {
	t.Helper()
	reg, srv := newFakeRegistry(t)
	e := &env{reg: reg, client: NewClient(srv.URL, 2*time.Second), subject: "orders-value", readerVersion: readerVersion}
	for _, s := range []string{v1, v2, v3} {
		e.ids = append(e.ids, reg.register(e.subject, s))
	}
	e.other = reg.register("payments-value", `{"type":"record","name":"Pay","fields":[{"name":"x","type":"int"}]}`)
	acc, err := config.ParseVersions(accept)
	if err != nil {
		t.Fatal(err)
	}
	set := Settings{Subject: e.subject, Accept: acc, ReaderVersion: readerVersion, Timeout: time.Second, CacheSize: 2}
	r, err := CheckAccepted(context.Background(), e.client, set)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAdmitter(e.client, set, r)
	if err != nil {
		t.Fatal(err)
	}
	return e, a
}

func encode(t *testing.T, id int, text string, rec map[string]any) []byte {
	t.Helper()
	s := avro.MustParse(text)
	body, err := avro.Marshal(s, rec)
	if err != nil {
		t.Fatal(err)
	}
	return AppendWire(nil, id, body)
}

func causeOf(t *testing.T, err error) tiers.Cause {
	t.Helper()
	var e *tiers.Error
	if !errors.As(err, &e) {
		t.Fatalf("want *tiers.Error, got %T %v", err, err)
	}
	return e.Cause
}

func TestAdmitCurrentVersionKeepsBytes(t *testing.T) {
	e, a := setup(t, "2-3", 3)
	in := encode(t, e.ids[2], v3, map[string]any{"id": "o1", "amount": int64(5), "currency": "USD"})
	got, err := a.Admit(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Value, in) || got.Record["currency"] != "USD" || got.Writer.Version != 3 {
		t.Fatalf("admitted %+v", got)
	}
}

func TestAdmitUpcastsOlderVersion(t *testing.T) {
	e, a := setup(t, "2-3", 3)
	in := encode(t, e.ids[1], v2, map[string]any{"id": "o2", "amount": int64(7)})
	got, err := a.Admit(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	id, body, err := ParseWire(got.Value)
	if err != nil || id != e.ids[2] {
		t.Fatalf("upcast value framed with %d, want reader id %d (%v)", id, e.ids[2], err)
	}
	var rec map[string]any
	if err := avro.Unmarshal(avro.MustParse(v3), body, &rec); err != nil {
		t.Fatal(err)
	}
	if rec["id"] != "o2" || rec["amount"] != int64(7) || rec["currency"] != "EUR" {
		t.Fatalf("upcast record %v", rec)
	}
	if got.Writer.Version != 2 || got.Writer.Subject != e.subject {
		t.Fatalf("writer info %+v", got.Writer)
	}
}

func TestAdmitFailures(t *testing.T) {
	e, a := setup(t, "2-3", 3)
	good := encode(t, e.ids[1], v2, map[string]any{"id": "o", "amount": int64(1)})
	cases := []struct {
		name  string
		value []byte
		want  tiers.Cause
		info  Info
	}{
		{"empty", nil, tiers.CauseWireFormat, Info{}},
		{"garbage", []byte("{\"json\":true}"), tiers.CauseWireFormat, Info{}},
		{"short header", []byte{0, 0, 1}, tiers.CauseWireFormat, Info{}},
		{"unknown id", AppendWire(nil, 99999, []byte{2, 'x'}), tiers.CauseSchemaNotFound, Info{ID: 99999}},
		{"unsupported version", encode(t, e.ids[0], v1, map[string]any{"id": "o"}), tiers.CauseSchemaUnsupported, Info{ID: e.ids[0], Subject: e.subject, Version: 1}},
		{"other subject", AppendWire(nil, e.other, []byte{2}), tiers.CauseSchemaUnsupported, Info{ID: e.other, Subject: "payments-value", Version: 1}},
		{"truncated body", good[:len(good)-1], tiers.CausePayloadMalformed, Info{ID: e.ids[1], Subject: e.subject, Version: 2}},
		{"trailing bytes", append(append([]byte{}, good...), 1, 2, 3), tiers.CausePayloadMalformed, Info{ID: e.ids[1], Subject: e.subject, Version: 2}},
		{"huge string length", AppendWire(nil, e.ids[1], []byte{0xfe, 0xff, 0xff, 0xff, 0x0f}), tiers.CausePayloadMalformed, Info{ID: e.ids[1], Subject: e.subject, Version: 2}},
	}
	for _, tc := range cases {
		got, err := a.Admit(context.Background(), tc.value)
		if c := causeOf(t, err); c != tc.want {
			t.Errorf("%s: cause %d, want %d (%v)", tc.name, c, tc.want, err)
		}
		if got.Writer != tc.info {
			t.Errorf("%s: info %+v, want %+v", tc.name, got.Writer, tc.info)
		}
	}
}

func TestRegistryOutageIsTransientAndNotCached(t *testing.T) {
	e, a := setup(t, "2-3", 3)
	in := encode(t, e.ids[1], v2, map[string]any{"id": "o", "amount": int64(1)})
	want := map[int]tiers.Cause{
		http.StatusServiceUnavailable: tiers.CauseRegistryUnavailable, http.StatusInternalServerError: tiers.CauseRegistryUnavailable,
		// A refused credential is as transient (and as uncached), with a code of its own.
		http.StatusUnauthorized: tiers.CauseRegistryUnauthorized, http.StatusForbidden: tiers.CauseRegistryUnauthorized,
	}
	for _, st := range []int{http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusUnauthorized, http.StatusForbidden} {
		e.reg.failNext(st, 1)
		_, err := a.Admit(context.Background(), in)
		if c := causeOf(t, err); c != want[st] {
			t.Fatalf("status %d: cause %d (%v)", st, c, err)
		}
	}
	if _, err := a.Admit(context.Background(), in); err != nil {
		t.Fatalf("after the outage: %v", err)
	}
	n := e.reg.requests.Load()
	for range 10 {
		if _, err := a.Admit(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	if e.reg.requests.Load() != n {
		t.Fatalf("cached id looked up again: %d requests", e.reg.requests.Load()-n)
	}
}

func TestRegistryTimeoutHonoursDeadline(t *testing.T) {
	e, a := setup(t, "2-3", 3)
	e.reg.mu.Lock()
	e.reg.delay = 5 * time.Second
	e.reg.mu.Unlock()
	in := encode(t, e.ids[1], v2, map[string]any{"id": "o", "amount": int64(1)})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := a.Admit(ctx, in)
	if c := causeOf(t, err); c != tiers.CauseRegistryUnavailable {
		t.Fatalf("cause %d (%v)", c, err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("lookup ignored its deadline: %s", waited)
	}
}

func TestCacheIsBounded(t *testing.T) {
	e, a := setup(t, "1-3", 3)
	for i, text := range []string{v1, v2, v3} {
		rec := map[string]any{"id": "o", "amount": int64(1), "currency": "X"}
		if _, err := a.Admit(context.Background(), encode(t, e.ids[i], text, rec)); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.cache) != 2 || len(a.order) != 2 {
		t.Fatalf("cache holds %d (order %d), bound is 2", len(a.cache), len(a.order))
	}
}

func TestFieldMissing(t *testing.T) {
	reg, srv := newFakeRegistry(t)
	c := NewClient(srv.URL, time.Second)
	id1 := reg.register("s", v1)
	reg.register("s", `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"must","type":"int"}]}`)
	acc, _ := config.ParseVersions("1-2")
	set := Settings{Subject: "s", Accept: acc, ReaderVersion: 2, Timeout: time.Second, CacheSize: 8}
	if _, err := CheckAccepted(context.Background(), c, set); err == nil || !strings.Contains(err.Error(), "accepted version 1") {
		t.Fatalf("start-up check must refuse an accepted version the reader cannot read: %v", err)
	}
	a, err := NewAdmitter(c, set, readerAt(t, c, "s", 2))
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Admit(context.Background(), encode(t, id1, v1, map[string]any{"id": "o"}))
	if causeOf(t, err) != tiers.CauseFieldMissing {
		t.Fatalf("want FIELD_MISSING, got %v", err)
	}
}

// FuzzParseWire: the wire-format parser never panics and agrees with
// AppendWire.
func FuzzParseWire(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 2, 'a'})
	f.Add([]byte{1})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, body, err := ParseWire(b)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendWire(nil, id, body), b) {
			t.Fatalf("round trip of %x", b)
		}
	})
}

// FuzzDecode: any body decodes to a record or an error, never a panic or an
// unbounded allocation.
func FuzzDecode(f *testing.F) {
	s := avro.MustParse(v3)
	good, _ := avro.Marshal(s, map[string]any{"id": "o", "amount": int64(3), "currency": "EUR"})
	f.Add(good)
	f.Add([]byte{0xfe, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decode(s, s, b)
	})
}

// TestEncodeFromJSON pins a bug the hook integration test found: a hook's
// replacement record comes from JSON, where every number is a float64 (or a
// json.Number), and Avro long refused it.
func TestEncodeFromJSON(t *testing.T) {
	e, a := setup(t, "2-3", 3)
	_ = e
	for _, amount := range []any{json.Number("9007199254740993"), float64(99)} {
		v, err := a.Encode(map[string]any{"id": "r", "amount": amount, "currency": "CHF"})
		if amount == float64(99) {
			// A float64 is not coerced: JSON from the hook is decoded
			// with UseNumber, so this only checks the error is clear.
			if err == nil {
				continue
			}
			if !strings.Contains(err.Error(), "amount") {
				t.Errorf("error does not name the field: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		_, body, _ := ParseWire(v)
		var rec map[string]any
		if err := avro.Unmarshal(avro.MustParse(v3), body, &rec); err != nil {
			t.Fatal(err)
		}
		if rec["amount"] != int64(9007199254740993) {
			t.Fatalf("amount %v: a long must survive exactly", rec["amount"])
		}
	}
	if _, err := a.Encode(map[string]any{"id": "r", "amount": json.Number("1.5"), "currency": "X"}); err == nil || !strings.Contains(err.Error(), "amount") {
		t.Fatalf("1.5 as a long: %v", err)
	}
}

// TestColdLookupIsShared: records of a new writer id arriving at once (relay
// tries several records at once) make one registry lookup, not one each;
// the record whose lookup it is can give up without failing the others.
func TestColdLookupIsShared(t *testing.T) {
	e, a := setup(t, "2-3", 3)
	in := encode(t, e.ids[1], v2, map[string]any{"id": "o1", "amount": int64(5)})
	e.reg.mu.Lock()
	e.reg.delay = 50 * time.Millisecond
	e.reg.mu.Unlock()
	before := e.reg.requests.Load()
	first, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		ctx := context.Background()
		if i == 0 {
			ctx = first
		}
		wg.Go(func() {
			_, errs[i] = a.Admit(ctx, in)
		})
		if i == 0 {
			time.Sleep(10 * time.Millisecond) // the first one leads the lookup
		}
	}
	time.Sleep(10 * time.Millisecond)
	cancel()
	wg.Wait()
	for i, err := range errs[1:] {
		if err != nil {
			t.Errorf("record %d: %v", i+1, err)
		}
	}
	// The leader's lookup was cancelled: one more lookup (two requests:
	// versions, then the schema) served the other seven.
	if got := e.reg.requests.Load() - before; got > 3 {
		t.Errorf("%d registry requests for one cold id, want at most 3", got)
	}
}

// readerAt compiles a subject's version as the canonical one, without
// the start-up check of the accepted versions.
func readerAt(t testing.TB, c *Client, subject string, version int) *Reader {
	t.Helper()
	id, text, err := c.ByVersion(context.Background(), subject, version)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := compileText(context.Background(), c, text)
	if err != nil {
		t.Fatal(err)
	}
	r, err := newReader(id, sc)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A few bytes claiming a million items of a type that takes none (null),
// arrays in arrays: each array was under the decoder's bound, and a
// 27-byte record allocated 222 MiB (ninth pentest). The items the body
// claims are counted before decoding, against what its bytes can hold;
// an ordinary record with arrays and maps passes.
func TestAvroItemsAreCountedBeforeDecoding(t *testing.T) {
	s := avro.MustParse(`{"type":"record","name":"r","fields":[{"name":"a","type":{"type":"array","items":{"type":"array","items":"null"}}}]}`)
	body := binary.AppendVarint(nil, 4) // four inner arrays
	for range 4 {
		body = binary.AppendVarint(body, 1<<20) // each claims 1,048,576 nulls
		body = binary.AppendVarint(body, 0)
	}
	body = binary.AppendVarint(body, 0)
	if _, err := decode(s, s, body); err == nil || !strings.Contains(err.Error(), "more array items") {
		t.Errorf("%d bytes claiming 4 Mi items: %v", len(body), err)
	}
	ok := avro.MustParse(`{"type":"record","name":"o","fields":[{"name":"tags","type":{"type":"array","items":"string"}},{"name":"attrs","type":{"type":"map","values":["null","long"]}},{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},{"name":"f","type":{"type":"fixed","name":"F","size":4}}]}`)
	b, err := avro.Marshal(ok, map[string]any{"tags": []any{"a", "b"}, "attrs": map[string]any{"x": int64(1), "y": nil}, "e": "B", "f": [4]byte{1, 2, 3, 4}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decode(ok, ok, b); err != nil {
		t.Errorf("an ordinary record: %v", err)
	}
}

// The count pass reads every body the encoder writes: each Avro type,
// logical types, unions, named references, nested arrays and maps, empty
// and in several blocks — a miscount would refuse good records.
func TestAvroCountReadsWhatTheEncoderWrites(t *testing.T) {
	s := avro.MustParse(`{"type":"record","name":"All","fields":[
		{"name":"n","type":"null"},{"name":"b","type":"boolean"},{"name":"i","type":"int"},{"name":"l","type":"long"},
		{"name":"f","type":"float"},{"name":"d","type":"double"},{"name":"s","type":"string"},{"name":"y","type":"bytes"},
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
		{"name":"u","type":{"type":"string","logicalType":"uuid"}},
		{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B","C"]}},
		{"name":"fx","type":{"type":"fixed","name":"F","size":3}},
		{"name":"opt","type":["null","string","E"]},
		{"name":"arr","type":{"type":"array","items":{"type":"array","items":"long"}}},
		{"name":"m","type":{"type":"map","values":{"type":"record","name":"Inner","fields":[{"name":"x","type":["null","Inner"]},{"name":"tags","type":{"type":"array","items":"string"}}]}}},
		{"name":"ref","type":"Inner"}]}`)
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 300 {
		inner := map[string]any{"x": nil, "tags": []any{}}
		if r.IntN(2) == 0 {
			inner = map[string]any{"x": map[string]any{"Inner": map[string]any{"x": nil, "tags": []any{"a"}}}, "tags": []any{"t1", "t2"}}
		}
		arr := []any{}
		for range r.IntN(5) {
			row := []any{}
			for range r.IntN(300) {
				row = append(row, r.Int64())
			}
			arr = append(arr, row)
		}
		m := map[string]any{}
		for k := range r.IntN(4) {
			m[fmt.Sprintf("k%d", k)] = inner
		}
		opts := []any{nil, map[string]any{"string": "v"}, map[string]any{"E": "B"}}
		rec := map[string]any{"n": nil, "b": r.IntN(2) == 0, "i": r.Int32(), "l": r.Int64(), "f": float32(1.5), "d": 2.5,
			"s": strings.Repeat("s", r.IntN(40)), "y": make([]byte, r.IntN(40)), "ts": time.UnixMilli(r.Int64N(1 << 40)).UTC(),
			"dec": big.NewRat(12345, 100), "u": "123e4567-e89b-12d3-a456-426614174000", "e": "C", "fx": [3]byte{1, 2, 3},
			"opt": opts[i%3], "arr": arr, "m": m, "ref": inner}
		body, err := avro.Marshal(s, rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkAvroItems(s, body); err != nil {
			t.Fatalf("record %d (%d bytes): %v", i, len(body), err)
		}
		if _, err := decode(s, s, body); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
}

// Blocks as other writers write them: several, and with a negative count
// followed by the block's size in bytes (Java's buffered encoder).
func TestAvroCountReadsSizedBlocks(t *testing.T) {
	s := avro.MustParse(`{"type":"record","name":"r","fields":[{"name":"a","type":{"type":"array","items":"long"}},{"name":"m","type":{"type":"map","values":"string"}}]}`)
	var b []byte
	b = binary.AppendVarint(b, -2) // a block of two items ...
	items := binary.AppendVarint(binary.AppendVarint(nil, 7), 8)
	b = binary.AppendVarint(b, int64(len(items))) // ... of this many bytes
	b = append(b, items...)
	b = binary.AppendVarint(b, 1) // then a block of one
	b = binary.AppendVarint(b, 9)
	b = binary.AppendVarint(b, 0)
	b = binary.AppendVarint(b, 1) // the map: one entry
	b = binary.AppendVarint(b, 1)
	b = append(b, 'k')
	b = binary.AppendVarint(b, 1)
	b = append(b, 'v')
	b = binary.AppendVarint(b, 0)
	if err := checkAvroItems(s, b); err != nil {
		t.Fatal(err)
	}
	rec, err := decode(s, s, b)
	if err != nil || len(rec["a"].([]any)) != 3 {
		t.Fatalf("%v %v", rec, err)
	}
}
