package payload

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"relay/internal/envelope"
)

// BenchmarkShownOneMiB times the failure page's rendering of a 1 MiB
// payload (JSON, and plain text) with the detector of known secret
// formats, against the same rendering without it, in one run, and
// reports the ratio:
//
//	go test ./internal/payload -run '^$' -bench ShownOneMiB -benchtime 5x
func BenchmarkShownOneMiB(b *testing.B) {
	if _, err := leaks(); err != nil {
		b.Fatal(err)
	}
	red := envelope.NewRedactor(nil, MaxShown)
	for name, payload := range map[string][]byte{"json": jsonMiB(), "text": textMiB(), "tokens": tokensMiB(), "cdata": cdataMiB(), "flat-list": flatListMiB(), "name-keys": nameKeysMiB(), "one-string": oneStringMiB(), "json-lines": jsonLinesMiB(), "generic-keys": genericKeysMiB(), "echoes": echoesMiB()} {
		b.Run(name, func(b *testing.B) {
			var with, without time.Duration
			for b.Loop() {
				detectKnown = false
				start := time.Now()
				Shown(red, payload)
				without += time.Since(start)
				detectKnown = true
				start = time.Now()
				Shown(red, payload)
				with += time.Since(start)
			}
			b.ReportMetric(float64(with.Milliseconds())/float64(b.N), "ms/render")
			b.ReportMetric(float64(without.Milliseconds())/float64(b.N), "ms/render-without")
			b.ReportMetric(with.Seconds()/without.Seconds(), "ratio")
		})
	}
}

// jsonMiB is a JSON array of orders, about 1 MiB, one of them with a
// token of a known format in a note.
func jsonMiB() []byte {
	var orders []map[string]any
	for i := 0; ; i++ {
		o := map[string]any{"orderId": fmt.Sprintf("o-%d", i), "customer": map[string]any{"id": fmt.Sprintf("c-%d", i%97), "country": "DE"},
			"lines": []any{map[string]any{"sku": "SKU-123", "qty": 2, "price": "19.90"}}, "note": "leave at the door"}
		if i == 500 {
			o["note"] = "pushed with ghp_R8x2Kq7ZtV4mN1pW9sL3cY6bH0fJ5dG2aE8u"
		}
		orders = append(orders, o)
		if i%100 == 0 {
			if b, _ := json.Marshal(orders); len(b) >= 1<<20 {
				return b
			}
		}
	}
}

// textMiB is about 1 MiB of log lines.
func textMiB() []byte {
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "2026-12-07T08:00:%02d.%03dZ INFO GET /api/orders?id=%d 200 %dms user-agent=curl/8.5\n", i%60, i%1000, i, i%40)
	}
	return []byte(b.String())
}

// tokensMiB is about 1 MiB of distinct tokens of a known format, the
// detector's worst case (its time grows faster than the text with many
// findings): what is shown of it, and only that, is read.
func tokensMiB() []byte {
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "ghp_R8x2Kq7ZtV4mN1pW9sL3cY6bH0f%09d ", i)
	}
	return []byte(b.String())
}

// cdataMiB is about 1 MiB of secret-named elements opening CDATA sections
// that never close: the fourth pentest's quadratic case (a lazy search to
// the end of the text for every element took 54 s at 256 KiB).
func cdataMiB() []byte {
	return []byte(`{"note": "` + strings.Repeat("<pin><![CDATA[", (1<<20)/14) + `"}`)
}

// flatListMiB and nameKeysMiB are the fifth pentest's quadratic cases: a
// list of short strings of even length (each element asked whether the
// whole list was a flat list of pairs), and a map of many *name keys each
// naming a secret (each compared with every key).
func flatListMiB() []byte {
	return []byte(`[` + strings.TrimSuffix(strings.Repeat(`"a",`, (1<<20)/4), ",") + `]`)
}

func nameKeysMiB() []byte {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, `"%dname":"pw",`, i)
	}
	return []byte(strings.TrimSuffix(b.String(), ",") + "}")
}

// oneStringMiB and jsonLinesMiB are JSON whose strings hold 1 MiB of
// text: one string, and 1,000 JSON lines of 1 KiB. Their strings are read
// within Sanitize's budget (a 1 MiB string took 8 s before it).
func oneStringMiB() []byte {
	b, _ := json.Marshal(map[string]any{"note": strings.Repeat("leave at the door a=b ", (1<<20)/22)})
	return b
}

func jsonLinesMiB() []byte {
	var lines []string
	for range 1000 {
		b, _ := json.Marshal(map[string]any{"n": strings.Repeat("leave at the door a=b ", 46)})
		lines = append(lines, string(b))
	}
	return []byte(strings.Join(lines, "\n"))
}

// genericKeysMiB and echoesMiB are the sixth pentest's cases: text in
// which the detector finds a generic key every 21 bytes (it matched an
// allowlist against the whole line for each: 9 s for 64 KiB on one
// line), and a list of 47,000 values under a secret's name beside a long
// string (each value looked for in the shown text by a pass of its own).
func genericKeysMiB() []byte {
	return []byte(strings.Repeat("api=Xk29fLq83vBz0PwA ", (1<<20)/21))
}

func echoesMiB() []byte {
	k := (1 << 20) / 2 / 11
	return []byte(`{"password":[` + strings.TrimSuffix(strings.Repeat(`"aaaaaaab",`, k), ",") + `],"note":"` + strings.Repeat("a", 1<<19) + `"}`)
}
