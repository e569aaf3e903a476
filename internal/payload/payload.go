// Package payload shows a record's bytes to an operator: decoded through
// the schema registry when it can be, and redacted by structure (a value
// under a secret's name is masked whole) and by pattern, then cut. The
// console's failure page and relay quarantine show use it.
package payload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"relay/internal/checks"
	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/schema"
)

// MaxShown bounds the payload shown.
const MaxShown = 64 << 10

// ForConfig renders values through the registry cfg names (none: raw),
// redacted with cfg's pattern: what relay quarantine show prints.
func ForConfig(cfg *config.Config) func(ctx context.Context, v []byte) (string, bool, string) {
	red := envelope.NewRedactor(cfg.RedactPattern, MaxShown)
	return func(ctx context.Context, v []byte) (string, bool, string) {
		var reg *schema.Client
		if cfg.SchemaRegistryURL != "" {
			c, err := checks.RegistryClient(cfg)
			if err != nil {
				return Shown(red, v), false, red.Redact("schema registry: " + err.Error())
			}
			reg = c
		}
		return Render(ctx, reg, red, v)
	}
}

// Render is a record's value as an operator may see it: decoded through
// the registry (Avro, Protobuf or JSON Schema, by its writer schema) when
// it can be, raw otherwise (text, or the first bytes of binary), always
// redacted by red and by the detector of known secret formats (detect.go),
// and cut at MaxShown after the redaction. why says why
// it is shown raw.
//
// ctx's deadline bounds the redaction (PageBudget when it has none): what
// is not checked by then is left out. Decoding has five seconds of its
// own, not cut short by that deadline (the registry answers once for a
// schema; relay caches it).
func Render(ctx context.Context, reg *schema.Client, red *envelope.Redactor, v []byte) (text string, decoded bool, why string) {
	if v == nil {
		return "", false, "the record has no value (a tombstone)"
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, PageBudget)
		defer cancel()
	}
	if reg != nil {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		dec, err := schema.Decode(c, reg, v)
		if err == nil {
			w := newWalk(ctx, red)
			b, err := json.MarshalIndent(w.at(dec.Record, 0), "", "  ")
			if err == nil {
				return known(ctx, maskEchoes(ctx, redactLines(ctx, red, shownLines(b)), w.echoes)), true, ""
			}
			why = red.Redact(err.Error())
		} else {
			why = red.Redact("not decoded: " + err.Error())
		}
	} else {
		why = "no schema registry configured"
	}
	return ShownCtx(ctx, red, v), false, why
}

// shownLines is the lines of an indented JSON document, redacted by its
// structure already, that the display limit can show (and a margin): the
// patterns read a line at a time, and what is past the cut is not shown.
//
// The line across the limit ends there, or at the last space before it
// when it is long (a 256 KiB string on one line was read whole again).
func shownLines(b []byte) []byte {
	const most = MaxShown + knownMargin
	if len(b) <= most {
		return b
	}
	if i := bytes.IndexByte(b[most:], '\n'); i >= 0 && i <= knownMargin {
		return b[:most+i]
	}
	end := bytes.LastIndexAny(b[:most], " \t\n")
	if end < most-knownMargin {
		end = most // a line without spaces (one long word): past the display limit anyway
	}
	for end > 0 && !utf8.RuneStart(b[end]) {
		end--
	}
	return b[:end]
}

// shownText is the part of a text the display limit can show, with room
// for what redaction removes (runs of spaces, secrets: twice the
// limit), cut at a space so that no secret is read in part.
func shownText(s string) string {
	const most = 2 * MaxShown
	if len(s) <= most {
		return s
	}
	end := strings.LastIndexAny(s[:most], " \t\r\n")
	if end <= 0 {
		end = most
		for end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
	}
	return s[:end]
}

// knownMargin is how far past the display limit the detector of known
// formats reads: a secret across the cut is in it whole.
const knownMargin = 4 << 10

// known is s, redacted already, with the secrets of known formats masked
// in what is shown of it, then cut. The detector reads only that (and a
// margin): its time grows faster than the text with many findings, and
// what is past the cut is not shown.
func known(ctx context.Context, s string) string {
	if len(s) > MaxShown+knownMargin {
		end := MaxShown + knownMargin
		for end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
		s = s[:end]
	}
	return cut(maskKnown(ctx, s))
}

// cut bounds what a page shows of a payload, after its redaction: a
// secret across the cut is masked whole, never shown in part.
func cut(s string) string {
	if len(s) <= MaxShown {
		return s
	}
	end := MaxShown
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "\n… (cut)"
}

// jsonTree parses b when it is a JSON object or array (numbers kept as
// they were written).
func jsonTree(b []byte) (any, bool) {
	s := bytes.TrimSpace(b)
	if len(s) == 0 || (s[0] != '{' && s[0] != '[') || !shapely(s) || !json.Valid(s) {
		return nil, false
	}
	d := json.NewDecoder(bytes.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// maxNesting bounds the depth of a JSON document shown by its structure:
// indenting one 10,000 levels deep took a gigabyte (a record's header
// can be that). A deeper one is shown as text, redacted by pattern.
const maxNesting = 64

// maxIndented bounds the size of a JSON document indented for the page:
// a megabyte of objects nested 63 deep ({"":{"":…}}) indented to 300 MiB,
// and four views at once took the console past its memory limit (seventh
// pentest). Such a document is shown as text, redacted by pattern.
const maxIndented = 8 << 20

// shapely says whether the JSON text b nests at most maxNesting deep and
// indents to at most maxIndented bytes (two spaces a level on every line
// of an element), strings skipped.
func shapely(b []byte) bool {
	depth, indented, inString, escaped := 0, len(b), false, false
	for _, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			if depth > maxNesting {
				return false
			}
			indented += 2*depth + 1
		case c == ',':
			indented += 2*depth + 1
		case c == '}' || c == ']':
			depth--
			indented += 2*max(depth, 0) + 1
		}
		if indented > maxIndented {
			return false
		}
	}
	return true
}

// jsonLines redacts JSON Lines (one document a line) by structure, each
// line on its own; ok is false unless every line that is not blank is a
// JSON object or array.
func jsonLines(ctx context.Context, red *envelope.Redactor, b []byte) (string, bool) {
	red = red.Max(math.MaxInt) // cut once, after everything (known)
	w := newWalk(ctx, red)     // one budget for every line, and their echoes
	var out []string
	shown := 0
	lines := bytes.Split(b, []byte("\n"))
	cut := false // stopped at the page's end with lines left
	for _, line := range lines {
		if shown > MaxShown+knownMargin {
			cut = true
			break // past what the page shows (known cuts there)
		}
		if w.late() {
			out = append(out, tooCostly)
			break
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		tree, ok := jsonTree(line)
		if !ok {
			return "", false
		}
		j, err := json.Marshal(w.at(tree, 0))
		if err != nil {
			return "", false
		}
		if w.late() {
			out = append(out, tooCostly)
			break
		}
		// Read only as far as the page shows: one line of a megabyte was
		// redacted whole (eighth pentest: 52 s).
		if left := MaxShown + knownMargin - shown; len(j) > left {
			end := max(left, 0)
			for end > 0 && !utf8.RuneStart(j[end]) {
				end--
			}
			j = j[:end]
		}
		out = append(out, red.Redact(string(j)))
		shown += len(out[len(out)-1]) + 1
	}
	return maskEchoes(ctx, strings.Join(out, "\n"), w.echoes), len(out) > 1 || (cut && len(lines) > 1)
}

// redactLines redacts each line of a JSON document, keeping its layout.
func redactLines(ctx context.Context, red *envelope.Redactor, b []byte) string {
	red = red.Max(math.MaxInt) // cut once, after everything (known)
	var out bytes.Buffer
	for i, line := range bytes.Split(b, []byte("\n")) {
		if ctx.Err() != nil {
			out.WriteString(tooCostly)
			break
		}
		if i > 0 {
			out.WriteByte('\n')
		}
		lead := len(line) - len(bytes.TrimLeft(line, " "))
		out.Write(line[:lead])
		out.WriteString(red.Redact(string(line[lead:])))
	}
	return out.String()
}

// Shown is b as an operator may see it, redacted: its text when it is
// UTF-8 without control characters; else (binary the registry cannot
// decode) only its size and first bytes (the wire format's magic byte and
// schema id): a secret in binary is out of reach of every redaction
// pattern, which needs the field's name beside it.
func Shown(red *envelope.Redactor, b []byte) string {
	ctx, cancel := context.WithTimeout(context.Background(), PageBudget)
	defer cancel()
	return ShownCtx(ctx, red, b)
}

// ShownCtx is Shown with ctx's deadline as its budget: what is not checked
// by then is left out.
func ShownCtx(ctx context.Context, red *envelope.Redactor, b []byte) string {
	if utf8.Valid(b) && !bytes.ContainsFunc(b, func(r rune) bool { return r < 0x20 && r != '\n' && r != '\r' && r != '\t' }) {
		b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // a byte order mark
		var quoted string
		if s := bytes.TrimSpace(b); len(s) > 1 && s[0] == '"' && json.Unmarshal(s, &quoted) == nil {
			// A JSON document sent as a JSON string: redacted as the
			// document it holds.
			b = []byte(quoted)
		}
		if tree, ok := jsonTree(b); ok {
			// JSON is redacted by its structure: a value under a secret's
			// name is masked whole, whatever it is (a string of several
			// words, an array, an object).
			w := newWalk(ctx, red)
			if out, err := json.MarshalIndent(w.at(tree, 0), "", "  "); err == nil {
				return known(ctx, maskEchoes(ctx, redactLines(ctx, red, shownLines(out)), w.echoes))
			}
		}
		if lines, ok := jsonLines(ctx, red, b); ok {
			return known(ctx, lines)
		}
		text, wide := shownText(yamlBlocks(string(b))), red.Max(MaxShown+knownMargin)
		w := &walk{ctx: ctx, red: wide, left: sanitizeBudget}
		if masked, ok := w.probeBase64(text, 0); ok {
			return known(ctx, masked)
		}
		if ctx.Err() != nil {
			return strings.TrimPrefix(tooCostly, "\n")
		}
		return known(ctx, wide.Redact(text))
	}
	return fmt.Sprintf("(%d bytes of binary, not shown; they begin % x)", len(b), b[:min(len(b), 5)])
}
