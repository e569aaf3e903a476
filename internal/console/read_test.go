package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"relay/internal/config"
)

func get(h http.Handler, path string, prepare func(*http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if prepare != nil {
		prepare(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Beyond loopback, reading needs a signed-in operator by default: a page
// asked for without one gets the sign-in form (401), whatever the path;
// the health check, the sign-in and the static files stay open. On
// loopback, or with RELAY_CONSOLE_READ_AUTH=open, reading is open.
func TestReadsNeedSignInBeyondLoopback(t *testing.T) {
	s := newTestServer(t, nil)
	h := s.Handler()
	for path, want := range map[string]int{"/nope": http.StatusUnauthorized, "/failures": http.StatusUnauthorized, "/failure?id=orders/0/1": http.StatusUnauthorized,
		"/replays/x/events": http.StatusUnauthorized, "/healthz": http.StatusOK, "/login": http.StatusOK, "/static/console.css": http.StatusOK} {
		if w := get(h, path, nil); w.Code != want {
			t.Errorf("GET %s without sign-in: %d, want %d", path, w.Code, want)
		}
	}
	if w := post(h, "/replay/choose", url.Values{"code": {"X"}}, nil); w.Code != http.StatusUnauthorized {
		t.Errorf("POST /replay/choose without sign-in: %d", w.Code)
	}
	// Any Authorization header is no pass to a page that is not a
	// script's action (found by an attack: an open/closed oracle).
	if w := post(h, "/replay/choose", url.Values{"ids": {"orders/0/42"}}, func(r *http.Request) { r.Header.Set("Authorization", "x") }); w.Code != http.StatusUnauthorized {
		t.Errorf("POST /replay/choose with a junk Authorization header: %d, want 401", w.Code)
	}
	c := post(h, "/login", url.Values{"name": {"alice"}, "token": {testToken}}, nil).Result().Cookies()[0]
	if w := get(h, "/nope", func(r *http.Request) { r.AddCookie(c) }); w.Code != http.StatusNotFound {
		t.Errorf("signed in: %d, want the page's own answer (404)", w.Code)
	}
	if w := get(h, "/nope", func(r *http.Request) { r.RemoteAddr = "10.0.0.3:1000"; r.Header.Set("X-Forwarded-User", "dave") }); w.Code != http.StatusNotFound {
		t.Errorf("through the proxy: %d, want 404", w.Code)
	}
	// A bearer token is no way to read.
	if w := get(h, "/nope", func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+testToken)
		r.Header.Set(ActorHeader, "x")
	}); w.Code != http.StatusUnauthorized {
		t.Errorf("a bearer token on a read: %d, want 401", w.Code)
	}
	open := newTestServer(t, map[string]string{config.EnvConsoleReadAuth: "open"})
	if w := get(open.Handler(), "/nope", nil); w.Code != http.StatusNotFound {
		t.Errorf("RELAY_CONSOLE_READ_AUTH=open: %d, want 404", w.Code)
	}
	cfg := newTestServer(t, nil).cfg
	lo, err := New(Options{Config: cfg, Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	if w := get(lo.Handler(), "/nope", nil); w.Code != http.StatusNotFound {
		t.Errorf("on loopback: %d, want 404", w.Code)
	}
	none := newTestServer(t, map[string]string{config.EnvConsoleToken: unset, config.EnvConsoleUserHeader: unset})
	if w := get(none.Handler(), "/", nil); w.Code != http.StatusForbidden {
		t.Errorf("reads behind sign-in with no way to sign in: %d, want 403 saying so", w.Code)
	}
}

// RELAY_CONSOLE_ALLOWED_HOSTS holds on every listener and for every peer,
// a trusted proxy's too; the health check answers any Host (the kubelet
// names the pod's address).
func TestAllowedHostsOnEveryListener(t *testing.T) {
	s := newTestServer(t, map[string]string{config.EnvConsoleAllowedHosts: "relay.example.com"})
	s.o.AllowedHosts = s.cfg.Console.AllowedHosts
	h := s.Handler()
	for _, c := range []struct {
		host, peer, path string
		want             int
	}{
		{"relay.example.com", "192.0.2.1:1", "/login", http.StatusOK},
		{"relay.example.com:443", "192.0.2.1:1", "/login", http.StatusOK},
		{"evil.example", "192.0.2.1:1", "/login", http.StatusMisdirectedRequest},
		{"evil.example", "10.0.0.2:1", "/login", http.StatusMisdirectedRequest}, // a trusted proxy
		{"10.244.1.7:9465", "10.244.0.1:1", "/healthz", http.StatusOK},
	} {
		if w := get(h, c.path, func(r *http.Request) { r.Host = c.host; r.RemoteAddr = c.peer }); w.Code != c.want {
			t.Errorf("Host %s from %s, %s: %d, want %d", c.host, c.peer, c.path, w.Code, c.want)
		}
	}
}
