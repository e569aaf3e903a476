// Package deploy_test checks the Grafana dashboard and the Prometheus
// alerting rules of this directory against relay: every metric they name
// is one relay exports (read from its real /metrics), every alert has a
// runbook section, and the dashboard is wired to its variables. promtool
// itself checks the rules and runs their unit tests (make rules).
package deploy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// selector is one vector selector of a PromQL expression: the metric name
// and its label matchers as written, without the braces.
type selector struct {
	name     string
	matchers string
}

// labelListWords take a parenthesised list of label names, which are not
// metric names.
var labelListWords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// keywords are PromQL's words that are neither functions nor metric names.
var keywords = []string{"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}

// selectors returns the vector selectors of a PromQL expression, which may
// hold Grafana's variables ($job, ${job}, $__rate_interval). It follows
// PromQL's lexical rules as far as names need: strings, label matchers in
// braces, durations in brackets, comments and numbers are skipped; an
// identifier followed by "(", or by "by (" or "without (", is a function
// or an aggregation; the keywords are not names. A selector with no name ({__name__="x"}) is an
// error, so that no name escapes the check.
func selectors(expr string) ([]selector, error) {
	sc := &scanner{s: expr}
	var out []selector
	for sc.i < len(sc.s) {
		c := sc.s[sc.i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if err := sc.skipString(); err != nil {
				return nil, err
			}
		case c == '#':
			sc.skipTo('\n')
		case c == '$':
			sc.skipVariable()
		case c == '[':
			if _, err := sc.enclosed('[', ']'); err != nil {
				return nil, err
			}
		case c == '{':
			return nil, fmt.Errorf("a selector without a metric name at %d in %q: write the name before the braces", sc.i, expr)
		case isIdentStart(c):
			sel, ok, err := sc.word()
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, sel)
			}
		case isDigit(c) || c == '.':
			sc.skipNumber()
		default:
			sc.i++
		}
	}
	return out, nil
}

type scanner struct {
	s string
	i int
}

// word reads an identifier and what follows it; ok when it is a selector.
func (sc *scanner) word() (selector, bool, error) {
	start := sc.i
	for sc.i < len(sc.s) && isIdent(sc.s[sc.i]) {
		sc.i++
	}
	id := sc.s[start:sc.i]
	next := sc.peek()
	switch {
	case slices.Contains(labelListWords, id):
		if next == '(' {
			sc.skipSpace()
			_, err := sc.enclosed('(', ')')
			return selector{}, false, err
		}
		return selector{}, false, nil
	case slices.Contains(keywords, strings.ToLower(id)), next == '(', sc.grouping():
		return selector{}, false, nil
	}
	sel := selector{name: id}
	if next == '{' {
		sc.skipSpace()
		m, err := sc.enclosed('{', '}')
		if err != nil {
			return selector{}, false, err
		}
		sel.matchers = m
	}
	return sel, true, nil
}

// grouping reports whether "by (" or "without (" comes next: the word
// before it is an aggregation (sum by (job) (...)).
func (sc *scanner) grouping() bool {
	rest := strings.TrimLeft(sc.s[sc.i:], " \t\r\n")
	for _, w := range []string{"by", "without"} {
		if after, ok := strings.CutPrefix(rest, w); ok && strings.HasPrefix(strings.TrimLeft(after, " \t\r\n"), "(") {
			return true
		}
	}
	return false
}

// enclosed reads from an opening character to its closing one, skipping
// strings, and returns what is between them.
func (sc *scanner) enclosed(open, closing byte) (string, error) {
	start := sc.i
	sc.i++ // open
	for sc.i < len(sc.s) {
		switch sc.s[sc.i] {
		case closing:
			sc.i++
			return sc.s[start+1 : sc.i-1], nil
		case '"', '\'', '`':
			if err := sc.skipString(); err != nil {
				return "", err
			}
		default:
			sc.i++
		}
	}
	return "", fmt.Errorf("%q opened at %d is not closed in %q", open, start, sc.s)
}

// skipString skips a quoted string: "…" and '…' with backslash escapes,
// `…` raw.
func (sc *scanner) skipString() error {
	quote, start := sc.s[sc.i], sc.i
	for sc.i++; sc.i < len(sc.s); sc.i++ {
		switch sc.s[sc.i] {
		case '\\':
			if quote != '`' {
				sc.i++
			}
		case quote:
			sc.i++
			return nil
		}
	}
	return fmt.Errorf("unterminated string at %d in %q", start, sc.s)
}

// skipVariable skips a Grafana variable: $name or ${name} (${name:format}).
func (sc *scanner) skipVariable() {
	sc.i++
	if sc.i < len(sc.s) && sc.s[sc.i] == '{' {
		sc.skipTo('}')
		sc.i++
		return
	}
	for sc.i < len(sc.s) && isIdent(sc.s[sc.i]) {
		sc.i++
	}
}

// skipNumber skips a number or a duration: 0.9, 1e3, 0x1f, 5m, 1h30m.
func (sc *scanner) skipNumber() {
	for sc.i < len(sc.s) && (isIdent(sc.s[sc.i]) || sc.s[sc.i] == '.') {
		sc.i++
	}
}

func (sc *scanner) skipTo(c byte) {
	for sc.i < len(sc.s) && sc.s[sc.i] != c {
		sc.i++
	}
}

func (sc *scanner) skipSpace() {
	for sc.i < len(sc.s) && strings.IndexByte(" \t\r\n", sc.s[sc.i]) >= 0 {
		sc.i++
	}
}

// peek is the next character that is not white space, 0 at the end.
func (sc *scanner) peek() byte {
	for j := sc.i; j < len(sc.s); j++ {
		if strings.IndexByte(" \t\r\n", sc.s[j]) < 0 {
			return sc.s[j]
		}
	}
	return 0
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdent(c byte) bool      { return isIdentStart(c) || isDigit(c) }

func TestSelectorsFindTheMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string // name, then name{matchers}
	}{
		{`sum by (le) (rate(relay_commit_duration_seconds_bucket{job=~"$job"}[$__rate_interval]))`,
			[]string{`relay_commit_duration_seconds_bucket{job=~"$job"}`}},
		{"a / on (job) group_left (x, y) b offset 5m", []string{"a", "b"}},
		{`label_replace(up == 0, "signal", "spans", "", "") or foo`, []string{"up", "foo"}},
		{`histogram_quantile(0.9, x { a = "}{" , b='\'' })`, []string{`x{ a = "}{" , b='\'' }`}},
		{"changes(p_start[30m]) > 2\nand on (job, instance)\nlast_over_time(build_info[30m])", []string{"p_start", "build_info"}},
		{`deriv(sum by (job, topic) (lag{topic!~".+[.]retry[.].+"})[30m:1m]) > 0`, []string{`lag{topic!~".+[.]retry[.].+"}`}},
		{"min(x) < 3 * 86400 and bool y unless Inf > z # w", []string{"x", "y", "z"}},
		{"sum(a) without (reason) / ignoring(code) ns:b:rate5m @ start() > 1e-3 + 0x1F", []string{"a", "ns:b:rate5m"}},
		{"rate(a[${__rate_interval}]) / $scale + `raw {b}`", []string{"a"}},
	} {
		got, err := selectors(tc.expr)
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		var names []string
		for _, s := range got {
			if s.matchers == "" {
				names = append(names, s.name)
			} else {
				names = append(names, s.name+"{"+s.matchers+"}")
			}
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("%q: selectors %q, want %q", tc.expr, names, tc.want)
		}
	}
	for _, bad := range []string{`{__name__="relay_x"}`, `sum(x{a="b)`, `x{a="b"`} {
		if _, err := selectors(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
