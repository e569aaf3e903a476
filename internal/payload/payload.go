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
	"maps"
	"math"
	"reflect"
	"slices"
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

// Sanitize makes a decoded record safe to show: the value of a field
// whose name says it holds a secret is masked whole; a string is
// redacted; a bytes or fixed field is shown by its redacted text, never as
// base64 or numbers (which no redaction pattern could read).
//
// Its strings are not cut: a string cut by its own redaction would show
// part of a secret at its end (the page is cut once, after everything).
//
// It reads strings up to a budget (sanitizeBudget bytes in all, in the
// order the page shows them: keys sorted); a string past it is not
// shown, and the one that crosses it is cut at a space: redaction reads
// about 4 µs a byte, and the page shows 64 KiB (a 1 MiB string took 8 s
// a view).
func Sanitize(red *envelope.Redactor, v any) any { return newWalk(context.Background(), red).at(v, 0) }

// sanitizeBudget is how many bytes of a decoded record's strings Sanitize
// redacts: twice what a page shows, as for text (shownText).
const sanitizeBudget = 2 * MaxShown

// PageBudget is how long rendering a record (its value and its headers)
// may take before what is not yet checked is left out, failing closed
// (seventh pentest: 64 KiB of the detector's rule keywords took 7 s): the
// console gives each failure page this much; Shown without a context
// too.
const PageBudget = 2 * time.Second

// tooCostly ends what a render could check in its time.
const tooCostly = "\n… (not shown: the rest took too long to check for secrets)"

// notShown stands for a string past the budget.
const notShown = "… (not shown: past what the page shows)"

// walk is one record's sanitizing: the redactor, the bytes of strings it
// may still read, its deadline (ctx), and the values it masked by their
// names (echoes: masked wherever else they stand, in documents inside
// strings and across JSON Lines too).
type walk struct {
	ctx    context.Context
	red    *envelope.Redactor
	left   int
	echoes []string
}

func newWalk(ctx context.Context, red *envelope.Redactor) *walk {
	return &walk{ctx: ctx, red: red.Max(math.MaxInt), left: sanitizeBudget}
}

// late says the render's time is up: what is not read yet is not shown.
func (w *walk) late() bool { return w.ctx.Err() != nil }

// masked is v masked by its name: its strings are echoes.
func (w *walk) masked(v any) string {
	var all func(any)
	all = func(v any) {
		switch x := v.(type) {
		case string:
			if len(x) >= minEcho {
				w.echoes = append(w.echoes, x)
			}
		case map[string]any:
			for _, e := range x {
				all(e)
			}
		case []any:
			for _, e := range x {
				all(e)
			}
		}
	}
	all(v)
	return envelope.Mask
}

// take spends the budget on s: s itself when it fits, the part of it
// that does cut at a space (ok false, cut), or nothing (ok false, "").
func (w *walk) take(s string) (part string, whole bool) {
	if len(s) <= w.left {
		w.left -= len(s)
		return s, true
	}
	end := w.left
	w.left = 0
	if end == 0 {
		return "", false
	}
	if i := strings.LastIndexAny(s[:end], " \t\r\n"); i > 0 {
		end = i
	}
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end], false
}

// maxDepth bounds how deep JSON inside JSON strings is followed.
const maxDepth = 4

// pairOf says whether map x is a name/value pair whose name is a
// secret's (pairNames, pairValues: {"name": "DB_PASSWORD", "value": …},
// a JSON Patch or SCIM operation's {"path": "/password", "value": …}),
// and which other keys hold such a value by their own pair of columns
// ({"option_name": "smtp_pass", "option_value": …}, setting_key and
// setting_value, attributeName and attributeValue).
func pairOf(x map[string]any) (bool, map[string]bool) {
	pair := false
	for _, k := range pairNames {
		if n, ok := x[k].(string); ok && envelope.SecretName(n) {
			pair = true
		}
	}
	// The keys by their lower case, once: compared for every secret's
	// name, they made a map of many such names quadratic (fifth pentest).
	var lower map[string][]string
	var of map[string]bool
	for k, e := range x {
		n, ok := e.(string)
		if !ok || !envelope.SecretName(n) {
			continue
		}
		lk := strings.ToLower(k)
		for _, suffix := range []string{"name", "key"} {
			prefix, found := strings.CutSuffix(lk, suffix)
			if !found || prefix == "" {
				continue
			}
			if lower == nil {
				lower = make(map[string][]string, len(x))
				for k2 := range x {
					lower[strings.ToLower(k2)] = append(lower[strings.ToLower(k2)], k2)
				}
			}
			for _, k2 := range lower[prefix+"value"] {
				if of == nil {
					of = map[string]bool{}
				}
				of[k2] = true
			}
		}
	}
	return pair, of
}

// flatPairs says whether x is a flat list of names and values (Node's
// rawHeaders: ["Host", "…", "X-Api-Key", "…"]): all strings, of even
// length, every name without a space. Once per list: asked per element,
// it made a long list quadratic (fifth pentest).
func flatPairs(x []any) bool {
	if len(x)%2 != 0 || len(x) < 4 {
		return false
	}
	for j, e := range x {
		s, ok := e.(string)
		if !ok || (j%2 == 0 && (s == "" || strings.ContainsAny(s, " \t"))) {
			return false
		}
	}
	return true
}

// jwkPrivate are a JSON Web Key's private members (RFC 7518: RSA, EC and
// OKP private parts, a symmetric key).
var jwkPrivate = []string{"d", "p", "q", "dp", "dq", "qi", "k", "oth"}

// pairNames are the keys that name the setting of a name/value pair, and
// pairValues (lower case) the keys of its value.
var (
	pairNames = []string{"name", "Name", "key", "Key", "NAME", "KEY", "k", "K", "id", "label", "path", "type", "header", "Header", "field", "Field", "ParameterKey", "parameterKey", "OptionName", "attributeName", "AttributeName",
		"setting", "Setting", "option", "Option", "property", "Property", "param", "Param", "parameter", "Parameter", "variable", "Variable", "var", "title", "Title"}
	pairValues = []string{"value", "val", "v", "values", "secret", "data", "content", "parametervalue", "optionvalue", "attributevalue"}
)

func (w *walk) at(v any, depth int) any {
	red := w.red
	switch x := v.(type) {
	case map[string]any:
		// A name/value pair ({"name": "DB_PASSWORD", "value": "…"}: a
		// Kubernetes env list, a Connect config, a header list): the
		// value of a secret's name is masked whole.
		pairSecret, secretOf := pairOf(x)
		_, jwk := x["kty"] // a JSON Web Key: its private members have one- or two-letter names
		out := make(map[string]any, len(x))
		// In the order the page shows them (encoding/json sorts keys):
		// the budget goes to what is shown first.
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if envelope.SecretKey(k) || (pairSecret && slices.Contains(pairValues, strings.ToLower(k))) || secretOf[k] || (jwk && slices.Contains(jwkPrivate, k)) {
				out[k] = w.masked(x[k])
				continue
			}
			out[k] = w.at(x[k], depth)
		}
		// A container's command and its arguments: Kubernetes' command
		// and args, Docker's Path and Args or Entrypoint and Cmd, ECS's
		// entryPoint and command: ["mysqldump"], ["-p…"].
		for _, c := range commandKeys {
			args, _ := x[c[1]].([]any)
			o, _ := out[c[1]].([]any)
			if f := commandIn(asList(x[c[0]])); f != nil && args != nil && len(o) == len(args) {
				w.maskShortFlags(args, o, f)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = w.at(e, depth)
		}
		flat := flatPairs(x)
		// ["Authorization", "…"]: a header or setting as a pair; and
		// ["--password", "…"] anywhere in a list (a command line).
		for i := 0; i+1 < len(x); i++ {
			name, ok := x[i].(string)
			if !ok {
				continue
			}
			flag := strings.TrimLeft(name, "-")
			if (len(x) == 2 || (flat && i%2 == 0) || (flag != name && !strings.Contains(flag, "="))) && envelope.SecretName(flag) {
				out[i+1] = w.masked(x[i+1])
			}
		}
		w.maskShortFlags(x, out, nil)
		return out
	case []byte:
		return w.bytes(x)
	case string:
		if x == "" {
			return x
		}
		if w.late() {
			return notShown
		}
		part, whole := w.take(x)
		switch {
		case part == "":
			return notShown
		case !whole:
			// Cut: no structure to read; the start, redacted.
			return red.Redact(part) + " … (cut)"
		}
		// JSON inside a string (a payload that carries a document as
		// text) is redacted by its structure too; past maxDepth such a
		// string is masked whole, its structure unread.
		if tree, ok := jsonTree([]byte(x)); ok {
			if depth >= maxDepth {
				return envelope.Mask
			}
			if b, err := json.Marshal(w.at(tree, depth+1)); err == nil {
				if len(b) > w.left { // read again as text: within the budget too
					w.left = 0
					return notShown
				}
				w.left -= len(b)
				return maskEchoes(w.ctx, red.Redact(string(b)), w.echoes)
			}
		}
		if masked, ok := w.probeBase64(x, depth); ok {
			return masked
		}
		return red.Redact(x)
	}
	// An Avro fixed decodes as a byte array ([N]byte).
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
		b := make([]byte, rv.Len())
		reflect.Copy(reflect.ValueOf(b), rv)
		return w.bytes(b)
	}
	return v
}

// bytes is a bytes field shown by its redacted text, within the budget.
func (w *walk) bytes(b []byte) any {
	if len(b) > w.left {
		w.left = 0
		return fmt.Sprintf("(%d bytes, not shown: past what the page shows)", len(b))
	}
	w.left -= len(b)
	if w.late() {
		return fmt.Sprintf("(%d bytes, not shown: no time left to check them)", len(b))
	}
	return ShownCtx(w.ctx, w.red, b)
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
