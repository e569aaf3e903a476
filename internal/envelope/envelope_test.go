package envelope

import (
	"bytes"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func sample() *Failure {
	t0 := time.Date(2026, 7, 31, 9, 10, 0, 0, time.UTC)
	return &Failure{
		ID: "orders/12/884193", SourceTopic: "orders", SourcePartition: 12, SourceOffset: 884193,
		SourceTimestamp: t0.Add(-time.Minute), ConsumerGroup: "relay", Attempt: 4,
		FirstFailedAt: t0, LastFailedAt: t0.Add(6*time.Minute + 42*time.Second), NotBefore: t0.Add(10 * time.Minute),
		Class: "transient", Code: "HOOK_RATE_LIMITED_EXHAUSTED", Message: "429 from hook",
		SchemaID: 7, SchemaSubject: "order-created", SchemaVersion: 3, ReplayID: "r-1", ReplayCount: 2,
		RecordTimestamp: t0.Add(-time.Minute),
	}
}

func TestHeadersRoundTrip(t *testing.T) {
	f := sample()
	got, err := Parse(append([]Header{{Key: "app", Value: []byte("x")}}, f.Headers()...))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, f) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, f)
	}
}

func TestParseErrors(t *testing.T) {
	if _, err := Parse([]Header{{Key: "app", Value: nil}}); !errors.Is(err, ErrNoEnvelope) {
		t.Fatalf("want ErrNoEnvelope, got %v", err)
	}
	_, err := Parse([]Header{{Key: FailureID, Value: []byte("a/0/1")}, {Key: Attempt, Value: []byte("-3")}, {Key: NotBefore, Value: []byte("soon")}})
	if err == nil || !strings.Contains(err.Error(), Attempt) || !strings.Contains(err.Error(), NotBefore) {
		t.Fatalf("errors must name the headers: %v", err)
	}
}

func TestStripKeepsOwnHeaders(t *testing.T) {
	in := append([]Header{{Key: "app", Value: []byte("1")}, {Key: TraceParent, Value: []byte("x")}}, sample().Headers()...)
	in = append(in, Compat{Spring: true, Connect: true}.Headers(sample())...)
	in = append(in, Header{Key: "app2", Value: []byte("2")})
	got := Strip(in)
	if len(got) != 2 || got[0].Key != "app" || got[1].Key != "app2" {
		t.Fatalf("Strip = %+v", got)
	}
}

func TestCompatSpringBinary(t *testing.T) {
	h := Compat{Spring: true}.Headers(sample())
	v, _ := Lookup(h, "kafka_dlt-original-partition")
	if !bytes.Equal(v, []byte{0, 0, 0, 12}) {
		t.Fatalf("spring partition = %v", v)
	}
}

func TestViewSeedShape(t *testing.T) {
	v := NewView(sample(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", []byte("k"), 10)
	if v.FailureID != "orders/12/884193" || v.PayloadSchema != "order-created.v3" || v.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		v.FirstFailedAt != "2026-07-31T09:10:00.000Z" || v.Source.Partition != 12 {
		t.Fatalf("view = %+v", v)
	}
}

// TestRedact pins redaction at the unit level: sensitive data put in
// an error message is gone from what relay writes.
func TestRedact(t *testing.T) {
	r := NewRedactor(regexp.MustCompile(`CUST-\d+`), 200)
	cases := map[string][]string{
		`Get "https://admin:s3cr3t@registry.example/subjects": dial tcp: refused`:    {"s3cr3t", "admin:"},
		"upstream said: Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc rejected": {"eyJhbGciOiJIUzI1NiJ9"},
		"call failed api_key=AKIA1234567890 region=eu":                               {"AKIA1234567890"},
		`{"password": "hunter2", "user": "x"}`:                                       {"hunter2"},
		"customer jane.doe@example.com not found":                                    {"jane.doe@example.com"},
		"card 4111 1111 1111 1111 declined":                                          {"4111 1111 1111 1111", "1111"},
		"card 4111-1111-1111-1111 declined, 5500000000000004 too":                    {"4111-1111", "5500000000000004"},
		"customer CUST-99812 blocked":                                                {"CUST-99812"},
		"line one\n\tat com.example.Foo(Foo.java:12)\nline three":                    {"\n", "\t"},
	}
	for in, secrets := range cases {
		out := r.Redact(in)
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("Redact(%q) = %q still contains %q", in, out, s)
			}
		}
	}
	if got := r.Redact("offset 884193 at partition 12"); got != "offset 884193 at partition 12" {
		t.Errorf("ordinary numbers must stay: %q", got)
	}
	long := NewRedactor(nil, 10).Redact(strings.Repeat("é", 20))
	if len(long) > 10 || !strings.HasSuffix(long, "…") {
		t.Errorf("bounded: %q (%d bytes)", long, len(long))
	}
}

// FuzzParse: the envelope decoder never panics, whatever the headers.
// Input: header pairs as key=value, separated by NUL.
func FuzzParse(f *testing.F) {
	var b bytes.Buffer
	for _, h := range sample().Headers() {
		b.WriteString(h.Key + "=" + string(h.Value) + "\x00")
	}
	f.Add(b.Bytes())
	f.Add([]byte(FailureID + "=\x00" + Attempt + "=99999999999999999999"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var hs []Header
		for _, kv := range bytes.Split(data, []byte{0}) {
			k, v, _ := bytes.Cut(kv, []byte("="))
			hs = append(hs, Header{Key: string(k), Value: v})
		}
		f, err := Parse(hs)
		if err == nil && f == nil {
			t.Fatal("nil envelope without error")
		}
		if f != nil {
			_ = NewView(f, string(data), data, len(data))
			_ = Strip(hs)
		}
	})
}
