package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"relay/internal/config"
	"relay/internal/schema"
)

// The same order in each format: version 1 is upcast to version 2, the
// canonical one, which adds a currency; Protobuf's version 3 has a field
// the canonical version lacks.
var formatSchemas = map[schema.Format][]string{
	schema.FormatAvro: {benchV2, benchV3},
	schema.FormatProtobuf: {
		"syntax = \"proto3\";\npackage bench;\nmessage Order { string id = 1; int64 amount = 2; bytes payload = 3; }\n",
		"syntax = \"proto3\";\npackage bench;\nmessage Order { string id = 1; int64 amount = 2; bytes payload = 3; string currency = 4; }\n",
		"syntax = \"proto3\";\npackage bench;\nmessage Order { string id = 1; int64 amount = 2; bytes payload = 3; int64 legacy = 9; }\n",
	},
	schema.FormatJSON: {
		`{"type":"object","properties":{"id":{"type":"string"},"amount":{"type":"integer"},"payload":{"type":"string","contentEncoding":"base64"}},"required":["id","amount"]}`,
		`{"type":"object","properties":{"id":{"type":"string"},"amount":{"type":"integer"},"payload":{"type":"string","contentEncoding":"base64"},"currency":{"type":"string","default":"EUR"}},"required":["id","amount"]}`,
	},
}

// formatCase is one format's admitter and its framed values.
type formatCase struct {
	format   schema.Format
	adm      *schema.Admitter
	old, cur []byte // written as v2 (upcast) and as v3 (kept)
	// rewrite, for Protobuf, is written as v1, which has a field v3
	// lacks: upcast decodes it and writes the canonical message again
	// (v2's bytes are already v3's and are only framed again).
	rewrite []byte
}

// formats measures admission (decode, check, upcast) of the same record
// in each format, in this process, round-robin so that the machine's
// noise falls on all of them alike: records per second and CPU per
// record, as ratios to Avro's.
func (b *bench) formats(ctx context.Context, seconds int) error {
	payload := make([]byte, max(b.o.size-40, 16))
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	var cases []*formatCase
	for _, f := range []schema.Format{schema.FormatAvro, schema.FormatProtobuf, schema.FormatJSON} {
		c, err := b.formatCase(ctx, f, payload)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		cases = append(cases, c)
	}
	type tally struct {
		n   int
		cpu time.Duration
		dur time.Duration
	}
	got := map[string]*tally{}
	const rounds = 5
	slot := time.Duration(seconds) * time.Second / (rounds * 7)
	for range rounds {
		for _, c := range cases {
			for _, v := range []struct {
				name  string
				value []byte
			}{{"upcast", c.old}, {"same", c.cur}, {"rewrite", c.rewrite}} {
				if v.value == nil {
					continue
				}
				key := string(c.format) + " " + v.name
				if got[key] == nil {
					got[key] = &tally{}
				}
				t := got[key]
				cpu0, t0 := selfCPU(), time.Now()
				for time.Since(t0) < slot {
					for range 100 {
						if _, err := c.adm.Admit(ctx, v.value); err != nil {
							return fmt.Errorf("%s: %w", key, err)
						}
					}
					t.n += 100
				}
				t.dur += time.Since(t0)
				t.cpu += selfCPU() - cpu0
			}
		}
	}
	fmt.Printf("\n== admission per format: %d-byte payload, %d rounds over %ds, one goroutine\n", len(payload), rounds, seconds)
	fmt.Printf("%-18s %12s %14s %10s %8s\n", "format, case", "records/s", "CPU µs/record", "vs Avro", "goal")
	for _, v := range []string{"upcast", "rewrite", "same"} {
		base := got["AVRO "+v]
		if v == "rewrite" {
			base = got["AVRO upcast"] // Avro always rewrites on upcast
		}
		for _, f := range []schema.Format{schema.FormatAvro, schema.FormatProtobuf, schema.FormatJSON} {
			t := got[string(f)+" "+v]
			if t == nil {
				continue
			}
			rate := float64(t.n) / t.dur.Seconds()
			ratio := rate / (float64(base.n) / base.dur.Seconds())
			goal := map[schema.Format]string{schema.FormatProtobuf: "≥ 0.8", schema.FormatJSON: "≥ 0.5"}[f]
			fmt.Printf("%-18s %12.0f %14.2f %10.2f %8s\n", string(f)+", "+v, rate, float64(t.cpu.Microseconds())/float64(t.n), ratio, goal)
		}
	}
	return nil
}

// selfCPU is the CPU this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// formatCase registers v2 and v3 of format f in the real registry and
// builds an admitter and the order written in each.
func (b *bench) formatCase(ctx context.Context, f schema.Format, payload []byte) (*formatCase, error) {
	subject := "bench-" + b.runID + "-" + strings.ToLower(string(f)) + "-value"
	for _, text := range formatSchemas[f] {
		req := map[string]any{"schema": text}
		if f != schema.FormatAvro {
			req["schemaType"] = string(f)
		}
		body, _ := json.Marshal(req)
		resp, err := http.Post(b.o.registry+"/subjects/"+subject+"/versions", "application/vnd.schemaregistry.v1+json", bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("schema registry (-registry %s): %w", b.o.registry, err)
		}
		out, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("register %s: %d %s", subject, resp.StatusCode, out)
		}
	}
	acc, _ := config.ParseVersions("1-3")
	set := schema.Settings{Subject: subject, Accept: acc, ReaderVersion: 2, Timeout: 5 * time.Second, CacheSize: 8}
	client := schema.NewClient(b.o.registry, 5*time.Second)
	r, err := schema.CheckAccepted(ctx, client, set)
	if err != nil {
		return nil, err
	}
	adm, err := schema.NewAdmitter(client, set, r)
	if err != nil {
		return nil, err
	}
	c := &formatCase{format: f, adm: adm}
	ids := make([]int, len(formatSchemas[f]))
	for v := range ids {
		id, _, err := client.ByVersion(ctx, subject, v+1)
		if err != nil {
			return nil, err
		}
		ids[v] = id
	}
	frame := func(id int, body []byte) []byte { return schema.AppendWire(nil, id, body) }
	switch f {
	case schema.FormatAvro:
		rec := map[string]any{"id": "order-000001", "amount": int64(4200), "payload": payload}
		old, err := avro.Marshal(avro.MustParse(benchV2), rec)
		if err != nil {
			return nil, err
		}
		rec["currency"] = "CHF"
		cur, err := avro.Marshal(avro.MustParse(benchV3), rec)
		if err != nil {
			return nil, err
		}
		c.old, c.cur = frame(ids[0], old), frame(ids[1], cur)
	case schema.FormatProtobuf:
		m := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "order-000001")
		m = protowire.AppendVarint(protowire.AppendTag(m, 2, protowire.VarintType), 4200)
		m = protowire.AppendBytes(protowire.AppendTag(m, 3, protowire.BytesType), payload)
		cur := protowire.AppendString(protowire.AppendTag(append([]byte{}, m...), 4, protowire.BytesType), "CHF")
		c.old, c.cur = frame(ids[0], append([]byte{0}, m...)), frame(ids[1], append([]byte{0}, cur...))
		legacy := protowire.AppendVarint(protowire.AppendTag(append([]byte{}, m...), 9, protowire.VarintType), 77)
		c.rewrite = frame(ids[2], append([]byte{0}, legacy...))
	case schema.FormatJSON:
		p := base64.StdEncoding.EncodeToString(payload)
		c.old = frame(ids[0], fmt.Appendf(nil, `{"id":"order-000001","amount":4200,"payload":%q}`, p))
		c.cur = frame(ids[1], fmt.Appendf(nil, `{"id":"order-000001","amount":4200,"payload":%q,"currency":"CHF"}`, p))
	}
	return c, nil
}
