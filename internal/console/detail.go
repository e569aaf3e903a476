package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/quarantine"
	"relay/internal/schema"
)

// maxShown bounds the payload a failure page shows.
const maxShown = 64 << 10

type header struct{ Key, Value string }

type detailData struct {
	ID         string
	Shown      quarantine.Shown
	Headers    []header
	Payload    string
	Decoded    bool
	Why        string // why the payload is shown raw
	History    []ledger.Event
	CanAct     bool
	Unresolved bool
	Replaying  bool
	ReadErr    string
	at         time.Time
}

func (d detailData) asOf() time.Time { return d.at }

func (s *Server) detail(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if _, _, _, err := quarantine.ParseFailureID(id); err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	snap, at, err := s.snapshot(r.Context(), false)
	if err != nil {
		s.failErr(w, r, "reading the quarantine", err)
		return
	}
	fl := snap.ByID[id]
	if fl == nil {
		s.fail(w, r, http.StatusNotFound, id+" is not in the ledger nor in a quarantine topic")
		return
	}
	d := detailData{ID: id, at: at, Unresolved: ledger.Unresolved(fl.State), Replaying: fl.State == ledger.Replaying}
	select {
	case s.reads <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	// The read and the redaction hold one of the few slots: redacting a
	// large payload costs CPU and memory, and readers must not be able to
	// run any number of them at once.
	defer func() { <-s.reads }()
	full, err := quarantine.WithBytes(r.Context(), s.cfg, fl)
	if err != nil {
		d.ReadErr = s.redactor().Redact(err.Error())
		full = fl
	}
	d.Shown = quarantine.ShowFailure(full, s.cfg.TraceURL)
	// relay redacted the message when it wrote it; the console's own
	// pattern applies too.
	d.Shown.ErrorMessage = s.redactor().Redact(d.Shown.ErrorMessage)
	d.History = d.Shown.History
	if rec := full.Record; rec != nil && rec.Kept && r.Context().Err() == nil {
		red := s.redactor()
		for _, h := range rec.Headers {
			v := shown(red, h.Value)
			if envelope.SecretName(h.Key) {
				v = envelope.Mask
			}
			d.Headers = append(d.Headers, header{h.Key, v})
		}
		d.Payload, d.Decoded, d.Why = s.payload(r.Context(), rec.Value)
	}
	s.render(w, r, http.StatusOK, "detail", "Failure "+id, d)
}

// redactor redacts what the console shows of a record exactly as relay
// redacts the envelope's error message, without its length bound.
func (s *Server) redactor() *envelope.Redactor {
	return envelope.NewRedactor(s.cfg.RedactPattern, maxShown)
}

// payload is the value as JSON decoded through the registry when it can
// be, raw otherwise (text, or hex), redacted.
func (s *Server) payload(ctx context.Context, v []byte) (text string, decoded bool, why string) {
	red := s.redactor()
	if v == nil {
		return "", false, "the record has no value (a tombstone)"
	}
	if s.o.Registry != nil {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		dec, err := schema.Decode(c, s.o.Registry, v)
		if err == nil {
			b, err := json.MarshalIndent(sanitize(red, dec.Record), "", "  ")
			if err == nil {
				return cut(redactLines(red, b)), true, ""
			}
			why = red.Redact(err.Error())
		} else {
			why = red.Redact("not decoded: " + err.Error())
		}
	} else {
		why = "no schema registry configured"
	}
	return shown(red, v), false, why
}

// cut bounds what a page shows of a payload, after its redaction: a
// secret across the cut is masked whole, never shown in part.
func cut(s string) string {
	if len(s) <= maxShown {
		return s
	}
	end := maxShown
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "\n… (cut)"
}

// sanitize makes a decoded record safe to show: the value of a field
// whose name says it holds a secret is masked whole; a string is
// redacted; a bytes or fixed field is shown by its redacted text, never as
// base64 or numbers (which no redaction pattern could read).
func sanitize(red *envelope.Redactor, v any) any { return sanitizeAt(red, v, 0) }

// maxDepth bounds how deep JSON inside JSON strings is followed.
const maxDepth = 4

func sanitizeAt(red *envelope.Redactor, v any, depth int) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if envelope.SecretName(k) {
				out[k] = envelope.Mask
				continue
			}
			out[k] = sanitizeAt(red, e, depth)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = sanitizeAt(red, e, depth)
		}
		return out
	case []byte:
		return shown(red, x)
	case string:
		// JSON inside a string (a payload that carries a document as
		// text) is redacted by its structure too.
		if depth < maxDepth {
			if tree, ok := jsonTree([]byte(x)); ok {
				if b, err := json.Marshal(sanitizeAt(red, tree, depth+1)); err == nil {
					return red.Redact(string(b))
				}
			}
		}
		return red.Redact(x)
	}
	// An Avro fixed decodes as a byte array ([N]byte).
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
		b := make([]byte, rv.Len())
		reflect.Copy(reflect.ValueOf(b), rv)
		return shown(red, b)
	}
	return v
}

// jsonTree parses b when it is a JSON object or array (numbers kept as
// they were written).
func jsonTree(b []byte) (any, bool) {
	s := bytes.TrimSpace(b)
	if len(s) == 0 || (s[0] != '{' && s[0] != '[') || !json.Valid(s) {
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

// jsonLines redacts JSON Lines (one document a line) by structure, each
// line on its own; ok is false unless every line that is not blank is a
// JSON object or array.
func jsonLines(red *envelope.Redactor, b []byte) (string, bool) {
	var out []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		tree, ok := jsonTree(line)
		if !ok {
			return "", false
		}
		j, err := json.Marshal(sanitize(red, tree))
		if err != nil {
			return "", false
		}
		out = append(out, red.Redact(string(j)))
	}
	return strings.Join(out, "\n"), len(out) > 1
}

// redactLines redacts each line of a JSON document, keeping its layout.
func redactLines(red *envelope.Redactor, b []byte) string {
	var out bytes.Buffer
	for i, line := range bytes.Split(b, []byte("\n")) {
		if i > 0 {
			out.WriteByte('\n')
		}
		lead := len(line) - len(bytes.TrimLeft(line, " "))
		out.Write(line[:lead])
		out.WriteString(red.Redact(string(line[lead:])))
	}
	return out.String()
}

// shown is b as an operator may see it, redacted: its text when it is
// UTF-8 without control characters; else (binary the registry cannot
// decode) only its size and first bytes (the wire format's magic byte and
// schema id): a secret in binary is out of reach of every redaction
// pattern, which needs the field's name beside it.
func shown(red *envelope.Redactor, b []byte) string {
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
			if out, err := json.MarshalIndent(sanitize(red, tree), "", "  "); err == nil {
				return cut(redactLines(red, out))
			}
		}
		if lines, ok := jsonLines(red, b); ok {
			return cut(lines)
		}
		return red.Redact(string(b))
	}
	return fmt.Sprintf("(%d bytes of binary, not shown; they begin % x)", len(b), b[:min(len(b), 5)])
}
