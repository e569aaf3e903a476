package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A failing answer's body is quoted on stderr, at most its first bytes: a
// large error page does not flood the helm test's log.
func TestProbeQuotesABoundedBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
	}))
	defer srv.Close()
	var stdout, stderr bytes.Buffer
	if code := Probe(context.Background(), []string{srv.URL}, 5*time.Second, &stdout, &stderr); code != Failure {
		t.Fatalf("Probe = %d, want Failure", code)
	}
	if !strings.Contains(stderr.String(), "503") || stderr.Len() > 2048 {
		t.Fatalf("stderr has %d bytes (want the status and at most 2 KiB): %.200s", stderr.Len(), stderr.String())
	}
}
