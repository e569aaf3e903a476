package payload

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/schema"
)

// D8 as operators see it: a JSON record that does not parse is shown as
// binary (its magic byte), but the note says why, quoting up to 32 bytes
// of the body from segmentio's syntax error, past the structural masking.
func TestRenderNoteDoesNotEchoTheBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"schema": `{"type":"object"}`, "schemaType": "JSON"})
	}))
	defer srv.Close()
	red := envelope.NewRedactor(nil, MaxShown)
	text, _, why := Render(t.Context(), schema.NewClient(srv.URL, time.Second), red,
		schema.AppendWire(nil, 7, []byte(`{"user":"a","password" "hunter2"}`)))
	if strings.Contains(text+why, "hunter2") {
		t.Fatalf("the operator sees the secret: text %q, note %q", text, why)
	}
}

// relay quarantine show's rendering applies the configured pattern to a
// decoded record, line by line.
func TestForConfigRedactsWithThePattern(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"schema": `{"type":"object"}`, "schemaType": "JSON"})
	}))
	defer srv.Close()
	cfg := &config.Config{SchemaRegistryURL: srv.URL, SchemaTimeout: time.Second, RedactPattern: regexp.MustCompile(`ACME-[0-9]+`)}
	text, decoded, why := ForConfig(cfg)(t.Context(), schema.AppendWire(nil, 7, []byte(`{"ref":"order ACME-42","card":"4111 1111 1111 1111"}`)))
	if !decoded || strings.Contains(text, "ACME-42") || strings.Contains(text, "4111") {
		t.Fatalf("decoded %v (%s): %s", decoded, why, text)
	}
}
