package payload

import (
	"context"
	"index/suffixarray"
	"slices"
	"strings"
	"time"

	"relay/internal/envelope"
)

// maskSpans is s with each byte range of spans (any order, overlapping
// or not) masked, ranges that touch or overlap masked as one.
func maskSpans(s string, spans [][2]int) string {
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var b strings.Builder
	at := 0
	for i := 0; i < len(spans); {
		start, end := max(spans[i][0], at), spans[i][1]
		for i++; i < len(spans) && spans[i][0] <= end; i++ {
			end = max(end, spans[i][1])
		}
		if end <= start {
			continue
		}
		b.WriteString(s[at:start])
		b.WriteString(envelope.Mask)
		at = end
	}
	b.WriteString(s[at:])
	return b.String()
}

// maskGrace is how long masking the values found (echoes, secrets found
// elsewhere) may take once a render's time is up: the step that keeps a
// value found in one place from showing in another runs to its end, or
// nothing is shown.
const maskGrace = time.Second

// maxOccurrences bounds how often one value is looked for in a text;
// past it the text is not shown (a value masked by its name, a thousand
// times over in one page, is no page to read).
const maxOccurrences = 4096

// occurrences are the byte ranges of s covered by an occurrence of a
// value of vals (each at least minLen bytes), merged, found through one
// index of s: a pass over s for each value made thousands of values
// quadratic (sixth pentest: 47,000 echoes of a password list, 7.7 s).
// ok is false when a value occurs more than maxOccurrences times.
//
// It stops, ok false, when ctx ends.
func occurrences(ctx context.Context, s string, vals []string, minLen int) (spans [][2]int, ok bool) {
	if len(vals) == 0 || s == "" {
		return nil, true
	}
	var idx *suffixarray.Index
	cover := make([]int32, len(s)+1) // +1 where an occurrence starts, -1 past its end
	seen := make(map[string]bool, len(vals))
	for _, v := range vals {
		if len(v) < minLen || len(v) > len(s) || seen[v] {
			continue
		}
		if ctx.Err() != nil {
			return nil, false
		}
		seen[v] = true
		if idx == nil {
			idx = suffixarray.New([]byte(s))
		}
		at := idx.Lookup([]byte(v), maxOccurrences+1)
		if len(at) > maxOccurrences {
			return nil, false
		}
		for _, a := range at {
			cover[a]++
			cover[a+len(v)]--
		}
	}
	depth, start := int32(0), 0
	for i, d := range cover {
		if depth == 0 && d > 0 {
			start = i
		}
		depth += d
		if depth == 0 && d < 0 {
			spans = append(spans, [2]int{start, i})
		}
	}
	return spans, true
}
