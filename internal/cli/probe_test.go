package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// relay probe: every URL answering 200 is OK; one 503, a redirect or an
// unreachable address fails naming it; a URL that is not http(s) is bad
// input and nothing is fetched.
func TestProbe(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		switch r.URL.Path {
		case "/readyz":
			w.WriteHeader(http.StatusOK)
		case "/moved":
			http.Redirect(w, r, "/readyz", http.StatusFound)
		default:
			http.Error(w, "not ready: broker unreachable", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var out, errs bytes.Buffer
	if code := Probe(t.Context(), []string{srv.URL + "/readyz", srv.URL + "/readyz"}, time.Second, &out, &errs); code != OK {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	for _, bad := range []string{"/down", "/moved"} {
		out.Reset()
		errs.Reset()
		if code := Probe(t.Context(), []string{srv.URL + "/readyz", srv.URL + bad}, time.Second, &out, &errs); code != Failure || !strings.Contains(errs.String(), srv.URL+bad) {
			t.Fatalf("%s: exit %d, stderr %q", bad, code, errs.String())
		}
	}
	if !strings.Contains(errs.String(), "302") {
		t.Errorf("a redirect was followed: %q", errs.String())
	}
	errs.Reset()
	if code := Probe(t.Context(), []string{"http://127.0.0.1:1/readyz"}, time.Second, &out, &errs); code != Failure {
		t.Fatalf("unreachable: exit %d", code)
	}
	before := hits
	if code := Probe(t.Context(), []string{srv.URL + "/readyz", "relay-0:9464/readyz"}, time.Second, &out, &errs); code != Usage || hits != before {
		t.Fatalf("not a URL: exit %d, %d fetches", code, hits-before)
	}
}

// A timeout of 0 (no bound) is bad input; a URL's credentials are not
// printed.
func TestProbeRefusesNoTimeoutAndMasks(t *testing.T) {
	var out, errs bytes.Buffer
	if code := Probe(t.Context(), []string{"http://127.0.0.1:1/readyz"}, 0, &out, &errs); code != Usage {
		t.Fatalf("timeout 0: exit %d", code)
	}
	errs.Reset()
	if code := Probe(t.Context(), []string{"http://u:s3cret@127.0.0.1:1/readyz?token=t0k"}, time.Second, &out, &errs); code != Failure ||
		strings.Contains(errs.String(), "s3cret") || strings.Contains(errs.String(), "t0k") {
		t.Fatalf("exit %d, stderr %q", code, errs.String())
	}
}
