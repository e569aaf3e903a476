package payload

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"path"
	"regexp"
	"strings"

	"relay/internal/envelope"
)

// A secret sent base64-encoded is out of reach of every pattern: a
// document (a Kubernetes Secret's data, a token's JSON claims, a config
// blob) or a key in DER. Each long base64 run is decoded and looked at:
// JSON is redacted by its structure, and the run is masked whole when
// anything in it was; DER (an ASN.1 SEQUENCE, the shape of every key and
// certificate) is masked whole.

// base64Run is a run of base64 (standard or URL alphabet) long enough to
// hold a secret worth encoding.
var base64Run = regexp.MustCompile(`[A-Za-z0-9+/_-]{24,}={0,2}`)

// decode64 decodes s in any of base64's four forms.
func decode64(s string) ([]byte, bool) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}

// secretIn64 says whether the base64 run s decodes to something that
// holds a secret: JSON whose redaction masks something, text the
// patterns redact, or DER.
func (w *walk) secretIn64(s string, depth int) bool {
	if w.late() {
		return true // not checked: masked
	}
	red := w.red
	b, ok := decode64(s)
	if !ok || len(b) < 16 {
		return false
	}
	if isDER(b) {
		return true // a key or a certificate
	}
	if tree, ok := jsonTree(b); ok {
		if depth >= maxDepth {
			return true
		}
		clean, err := json.Marshal(w.at(tree, depth+1))
		raw, err2 := json.Marshal(tree)
		return err != nil || err2 != nil || !bytes.Equal(clean, raw)
	}
	if isText(b) {
		t := strings.Join(strings.Fields(string(b)), " ")
		return red.Redact(t) != t
	}
	return false
}

// probeBase64 masks every base64 run of s that holds a secret; ok says
// one did (then the rest of s is redacted too).
func (w *walk) probeBase64(s string, depth int) (string, bool) {
	red := w.red
	found := false
	out := base64Run.ReplaceAllStringFunc(s, func(run string) string {
		if w.secretIn64(run, depth) {
			found = true
			return envelope.Mask
		}
		return run
	})
	if !found {
		return s, false
	}
	return red.Redact(out), true
}

// isText says whether b is text: UTF-8 without control characters but
// line breaks and tabs.
func isText(b []byte) bool {
	return len(b) > 0 && !bytes.ContainsFunc(b, func(r rune) bool { return r == 0xfffd || (r < 0x20 && r != '\n' && r != '\r' && r != '\t') })
}

// yamlBlock is a YAML key whose value is on the lines below it: a block
// scalar (key: | or key: >, with their indicators), a list or a map
// (key: and nothing after it).
var yamlBlock = regexp.MustCompile(`^(\s*)(?:-\s+)?["']?([A-Za-z0-9_.-]+)["']?\s*:\s*(?:[|>][-+0-9]*)?\s*(?:#.*)?$`)

// yamlBlocks masks the values below secrets' names in YAML text: the
// lines under such a key, indented deeper than it (a list's items at its
// own indentation too), become one mask; the patterns see one line at a
// time, and would take the indicator, or nothing, for the value.
func yamlBlocks(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	lines := strings.Split(s, "\n")
	out := lines[:0:0]
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		m := yamlBlock.FindStringSubmatch(lines[i])
		if m == nil || !envelope.SecretName(m[2]) {
			continue
		}
		indent := len(m[1])
		j := i + 1
		for j < len(lines) {
			t := strings.TrimLeft(lines[j], " \t")
			in := len(lines[j]) - len(t)
			if t != "" && in < indent || (in == indent && !strings.HasPrefix(t, "- ")) && t != "" {
				break
			}
			j++
		}
		if j > i+1 {
			out = append(out, strings.Repeat(" ", indent+2)+envelope.Mask)
		}
		i = j - 1
	}
	return strings.Join(out, "\n")
}

// isDER says whether b is one ASN.1 SEQUENCE whose length is b's: the
// shape of every DER key and certificate (PKCS#1, PKCS#8, SEC 1, X.509),
// which random bytes have about once in 65,000 tries.
func isDER(b []byte) bool {
	if len(b) < 32 || b[0] != 0x30 {
		return false
	}
	switch n := b[1]; {
	case n < 0x80:
		return int(n)+2 == len(b)
	case n == 0x81:
		return int(b[2])+3 == len(b)
	case n == 0x82:
		return int(b[2])<<8|int(b[3])+4 == len(b)
	}
	return false
}

// A value masked for its name may stand elsewhere in the same payload: a
// password-reset event carries its token, and a link holding it. Every
// value a structure masks by name (at least minEcho bytes) is masked
// wherever else it is shown.
const minEcho = 8

// maskEchoes masks in s every value of vals, as is and JSON-escaped, in
// one pass; a value found in it more than maxOccurrences times leaves
// nothing of s to show.
func maskEchoes(ctx context.Context, s string, vals []string) string {
	all := make([]string, 0, len(vals))
	for _, v := range vals {
		all = append(all, v)
		if b, err := json.Marshal(v); err == nil && len(b) > 2 {
			if esc := string(b[1 : len(b)-1]); esc != v {
				all = append(all, esc)
			}
		}
	}
	// The safety step, after the deadline too: a second of its own.
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), maskGrace)
	defer cancel()
	spans, ok := occurrences(grace, s, all, minEcho)
	if !ok {
		return envelope.Mask + " (a value masked by its name stands here too often, or took too long to look for, to show the rest)"
	}
	return maskSpans(s, spans)
}

// shortFlag is a command's password flag: -p of mysql, attached only
// (-p alone prompts, and the word after it is a database), -p of
// sshpass, -a of redis-cli, -w of the LDAP tools, attached or the next
// argument.
type shortFlag struct {
	flag string
	next bool
}

var shortFlags = map[string]shortFlag{
	"mysql": {"-p", false}, "mysqldump": {"-p", false}, "mysqladmin": {"-p", false}, "mariadb": {"-p", false}, "mariadb-dump": {"-p", false},
	"sshpass": {"-p", true}, "redis-cli": {"-a", true},
	"ldapsearch": {"-w", true}, "ldapmodify": {"-w", true}, "ldapadd": {"-w", true}, "ldapdelete": {"-w", true}, "ldappasswd": {"-w", true}, "ldapwhoami": {"-w", true},
}

// commandKeys are the keys of a command and its arguments in a container's
// description: Kubernetes', Docker's (inspect: Path and Args; config:
// Entrypoint and Cmd) and ECS's.
var commandKeys = [][2]string{{"command", "args"}, {"Path", "Args"}, {"Entrypoint", "Cmd"}, {"entryPoint", "command"}}

// asList is v as a list of arguments: a list, or one string.
func asList(v any) []any {
	switch x := v.(type) {
	case []any:
		return x
	case string:
		return []any{x}
	}
	return nil
}

// commandIn is the password flag of the first command of args that has
// one, nil when none does.
func commandIn(args []any) *shortFlag {
	for _, e := range args {
		if s, ok := e.(string); ok {
			if f, ok := shortFlags[path.Base(s)]; ok {
				return &f
			}
		}
	}
	return nil
}

// maskShortFlags masks, in out (args sanitized), the value of a command's
// password flag in an argument list (a container's command, an exec
// event): ["mysqldump", "-uroot", "-p…"]. f is the command's flag when it
// came before args (a container's command); else the list names it.
func (w *walk) maskShortFlags(args, out []any, f *shortFlag) {
	for i, e := range args {
		s, ok := e.(string)
		if !ok {
			continue
		}
		if g, ok := shortFlags[path.Base(s)]; ok {
			f = &g
			continue
		}
		switch {
		case f == nil:
		case s == f.flag && f.next && i+1 < len(out):
			out[i+1] = w.masked(args[i+1])
		case strings.HasPrefix(s, f.flag) && len(s) > len(f.flag):
			out[i] = f.flag + w.masked(strings.Trim(s[len(f.flag):], `'"`))
		}
	}
}
