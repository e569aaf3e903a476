package envelope

import "testing"

func TestID(t *testing.T) {
	for _, tc := range []struct {
		topic     string
		partition int32
		offset    int64
		want      string
	}{
		{"orders", 12, 884193, "orders/12/884193"},
		{"a.b-c_d", 0, 0, "a.b-c_d/0/0"},
		{"t", 2147483647, 9223372036854775807, "t/2147483647/9223372036854775807"},
	} {
		if got := ID(tc.topic, tc.partition, tc.offset); got != tc.want {
			t.Errorf("ID(%q, %d, %d) = %q, want %q", tc.topic, tc.partition, tc.offset, got, tc.want)
		}
	}
}

// otherHeader stands for another package's header type (the transaction
// loop's): the header functions read and write it as it is.
type otherHeader struct {
	Key   string
	Value []byte
}

func TestHeadersOfAnotherType(t *testing.T) {
	f := &Failure{ID: "orders/1/2", SourceTopic: "orders", SourcePartition: 1, SourceOffset: 2, Attempt: 2, Code: "X"}
	hs := []otherHeader{{Key: "app", Value: []byte("a")}, {Key: TraceParent, Value: []byte("00-1")}}
	hs = AppendFailure(hs, f)
	hs = Append(hs, []Header{{Key: "kafka_dlt-original-topic", Value: []byte("orders")}})
	back, err := Parse(hs)
	if err != nil || back.ID != f.ID || back.Attempt != 2 || back.Code != "X" {
		t.Fatalf("parsed %+v, %v", back, err)
	}
	if v, ok := Lookup(hs, TraceParent); !ok || string(v) != "00-1" {
		t.Fatalf("lookup %q %v", v, ok)
	}
	own := StripWithRoom(hs, 3)
	if len(own) != 1 || own[0].Key != "app" || cap(own) != 4 {
		t.Fatalf("own headers %+v, cap %d", own, cap(own))
	}
}

// BenchmarkID is the identity of a record at a realistic offset: every
// record relay handles gets one.
func BenchmarkID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = ID("orders.events", 12, 884193001)
	}
}
