package console

import (
	"context"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/envelope"
	"relay/internal/ledger"
	"relay/internal/payload"
	"relay/internal/quarantine"
)

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
	fl := snap.Get(id)
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
	full, err := s.reader.Full(r.Context(), id)
	if err != nil {
		d.ReadErr = s.redactor().Redact(err.Error())
	}
	if full == nil {
		full = fl
	}
	d.Shown = quarantine.ShowFailure(full, s.cfg.TraceURL)
	// relay redacted the message when it wrote it; the console's own
	// pattern applies too.
	d.Shown.ErrorMessage = s.redactor().Redact(d.Shown.ErrorMessage)
	d.History = d.Shown.History
	if rec := full.Record; rec != nil && rec.Kept && r.Context().Err() == nil {
		red := s.redactor()
		// One budget for the page: the headers may take half of it, the
		// value the rest; what is not checked in time is left out.
		page, cancel := context.WithTimeout(r.Context(), payload.PageBudget)
		defer cancel()
		headers, cancelHeaders := context.WithTimeout(page, payload.PageBudget/2)
		d.Headers = shownHeaders(headers, red, rec.Headers)
		cancelHeaders()
		if r.Context().Err() != nil {
			return
		}
		d.Payload, d.Decoded, d.Why = payload.Render(page, s.o.Registry, red, rec.Value)
	}
	s.render(w, r, http.StatusOK, "detail", "Failure "+id, d)
}

// redactor redacts what the console shows of a record exactly as relay
// redacts the envelope's error message, without its length bound.
func (s *Server) redactor() *envelope.Redactor {
	return envelope.NewRedactor(s.cfg.RedactPattern, payload.MaxShown)
}

// maxHeaders bounds the headers a failure's page shows.
const maxHeaders = 256

// shownHeaders are a record's headers as the page shows them. Their
// values share one budget (MaxShown bytes in all), each redacted on its
// own: fifteen of 64 KiB took minutes a view (sixth pentest).
//
// At most maxHeaders are shown, their names counted in the budget too, and
// none is read past ctx's end (4,064 headers with long names took 5 s of
// names alone: ninth pentest); a last row says how many were left out.
func shownHeaders(ctx context.Context, red *envelope.Redactor, hs []kafka.Header) []header {
	var out []header
	left, names := payload.MaxShown, payload.MaxShown // values' bytes, names' bytes
	for i, h := range hs {
		name := min(len(h.Key), envelope.MaxName)
		if i == maxHeaders || ctx.Err() != nil || name > names {
			out = append(out, header{"…", fmt.Sprintf("(%d more headers, not shown: past what the page shows, or no time left to check them)", len(hs)-i)})
			break
		}
		names -= name
		key := h.Key
		if len(key) > envelope.MaxName { // no name: cut, its value masked
			end := envelope.MaxName
			for end > 0 && !utf8.RuneStart(key[end]) {
				end--
			}
			key = key[:end] + "…"
		}
		key = red.Redact(key) // a key may hold a secret too (x-debug password=…)
		var v string
		switch {
		case envelope.SecretKey(h.Key):
			v = envelope.Mask
		case len(h.Value) > left:
			left = 0
			v = fmt.Sprintf("(%d bytes, not shown: the page shows %d bytes of header values in all)", len(h.Value), payload.MaxShown)
		default:
			left -= len(h.Value)
			v = payload.ShownCtx(ctx, red, h.Value)
		}
		out = append(out, header{key, v})
	}
	return out
}
