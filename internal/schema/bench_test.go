package schema

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protowire"

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

// BenchmarkAdmitFormats measures admission of the same ~1 KiB order in
// Protobuf and JSON Schema (relay-bench -formats compares them to Avro).
func BenchmarkAdmitFormats(b *testing.B) {
	payload := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz"), 38)
	b.Run("protobuf", func(b *testing.B) {
		reg, srv := newFakeRegistry(&testing.T{})
		defer srv.Close()
		c := NewClient(srv.URL, 0)
		reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message Order { string id = 1; int64 amount = 2; bytes payload = 3; }`)
		id := reg.registerAs("s", FormatProtobuf, `syntax = "proto3"; message Order { string id = 1; int64 amount = 2; bytes payload = 3; string currency = 4; }`)
		acc, _ := config.ParseVersions("1-2")
		a, err := NewAdmitter(c, Settings{Subject: "s", Accept: acc, ReaderVersion: 2, Timeout: 1e9, CacheSize: 8}, readerAt(b, c, "s", 2))
		if err != nil {
			b.Fatal(err)
		}
		m := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "order-000001")
		m = protowire.AppendVarint(protowire.AppendTag(m, 2, protowire.VarintType), 4200)
		m = protowire.AppendBytes(protowire.AppendTag(m, 3, protowire.BytesType), payload)
		m = protowire.AppendString(protowire.AppendTag(m, 4, protowire.BytesType), "CHF")
		v := AppendWire(nil, id, append([]byte{0}, m...))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Admit(context.Background(), v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		reg, srv := newFakeRegistry(&testing.T{})
		defer srv.Close()
		c := NewClient(srv.URL, 0)
		reg.registerAs("s", FormatJSON, `{"type":"object","properties":{"id":{"type":"string"},"amount":{"type":"integer"},"payload":{"type":"string"}},"required":["id","amount"]}`)
		id := reg.registerAs("s", FormatJSON, `{"type":"object","properties":{"id":{"type":"string"},"amount":{"type":"integer"},"payload":{"type":"string"},"currency":{"type":"string"}},"required":["id","amount"]}`)
		acc, _ := config.ParseVersions("1-2")
		a, err := NewAdmitter(c, Settings{Subject: "s", Accept: acc, ReaderVersion: 2, Timeout: 1e9, CacheSize: 8}, readerAt(b, c, "s", 2))
		if err != nil {
			b.Fatal(err)
		}
		v := AppendWire(nil, id, fmt.Appendf(nil, `{"id":"order-000001","amount":4200,"payload":%q,"currency":"CHF"}`, base64.StdEncoding.EncodeToString(payload)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.Admit(context.Background(), v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAvroItemsCount measures the pass that counts an Avro body's
// items before decoding, against the decoding it guards, in one run, and
// reports the ratio (what the count adds to admission's decode):
//
//	go test ./internal/schema -run '^$' -bench AvroItemsCount
func BenchmarkAvroItemsCount(b *testing.B) {
	s := avro.MustParse(`{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"},` +
		`{"name":"lines","type":{"type":"array","items":{"type":"record","name":"L","fields":[{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}}},` +
		`{"name":"attrs","type":{"type":"map","values":"string"}},{"name":"payload","type":"bytes"}]}`)
	lines := make([]any, 20)
	for i := range lines {
		lines[i] = map[string]any{"sku": "SKU-12345", "qty": i}
	}
	body, err := avro.Marshal(s, map[string]any{"id": "order-000001", "amount": int64(4200), "lines": lines,
		"attrs": map[string]any{"channel": "web", "country": "DE"}, "payload": make([]byte, 600)})
	if err != nil {
		b.Fatal(err)
	}
	var count, full time.Duration
	for b.Loop() {
		start := time.Now()
		if err := checkAvroItems(s, body); err != nil {
			b.Fatal(err)
		}
		count += time.Since(start)
		start = time.Now()
		if _, err := decode(s, s, body); err != nil {
			b.Fatal(err)
		}
		full += time.Since(start)
	}
	b.ReportMetric(float64(count.Nanoseconds())/float64(b.N), "ns/count")
	b.ReportMetric(float64(full.Nanoseconds())/float64(b.N), "ns/decode")
	b.ReportMetric(count.Seconds()/full.Seconds(), "ratio")
}
