package payload

import (
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

	"relay/internal/envelope"
)

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
