package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
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
	full, err := quarantine.WithBytes(r.Context(), s.cfg, fl)
	if err != nil {
		d.ReadErr = err.Error()
		full = fl
	}
	d.Shown = quarantine.ShowFailure(full, s.cfg.TraceURL)
	d.History = d.Shown.History
	if rec := full.Record; rec != nil && rec.Kept {
		red := s.redactor()
		for _, h := range rec.Headers {
			d.Headers = append(d.Headers, header{h.Key, red.Redact(printable(h.Value))})
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
			b, err := json.MarshalIndent(dec.Record, "", "  ")
			if err == nil {
				return redactLines(red, b), true, ""
			}
			why = err.Error()
		} else {
			why = "not decoded: " + err.Error()
		}
	} else {
		why = "no schema registry configured"
	}
	return red.Redact(printable(v[:min(len(v), maxShown)])), false, why
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

// printable is b as text when it is UTF-8 without control characters,
// else as hex.
func printable(b []byte) string {
	if utf8.Valid(b) && !bytes.ContainsFunc(b, func(r rune) bool { return r < 0x20 && r != '\n' && r != '\t' }) {
		return string(b)
	}
	return fmt.Sprintf("(%d bytes, hex) %s", len(b), hex.EncodeToString(b[:min(len(b), 4096)]))
}
