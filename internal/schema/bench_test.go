package schema

import (
	"context"
	"testing"

	"github.com/hamba/avro/v2"

	"relay/internal/config"
)

const benchV2 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"},{"name":"payload","type":"bytes"}]}`
const benchV3 = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"},{"name":"payload","type":"bytes"},{"name":"currency","type":"string","default":"EUR"}]}`

// BenchmarkAdmit measures admission of a ~1 KiB record: decode with the
// resolved schema, then re-encode to the reader (upcast), against the same
// version (decode only, bytes kept).
func BenchmarkAdmit(b *testing.B) {
	reg, srv := newFakeRegistry(&testing.T{})
	defer srv.Close()
	c := NewClient(srv.URL, 0)
	id2 := reg.register("s", benchV2)
	id3 := reg.register("s", benchV3)
	acc, _ := config.ParseVersions("1-2")
	set := Settings{Subject: "s", Accept: acc, ReaderVersion: 2, Timeout: 1e9, CacheSize: 8}
	a, err := NewAdmitter(c, set, readerAt(b, c, "s", 2))
	if err != nil {
		b.Fatal(err)
	}
	rec := map[string]any{"id": "order-000001", "amount": int64(4200), "payload": make([]byte, 980)}
	for _, tc := range []struct {
		name string
		id   int
		text string
	}{{"upcast", id2, benchV2}, {"same", id3, benchV3}} {
		body, _ := avro.Marshal(avro.MustParse(tc.text), rec)
		v := AppendWire(nil, tc.id, body)
		if _, err := a.Admit(context.Background(), v); err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Admit(context.Background(), v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
