package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Beyond loopback the session cookie is Secure with the __Host- prefix;
// on loopback over plain HTTP it is neither (a browser would drop a
// Secure cookie there), unless a trusted proxy says the client used TLS.
func TestSessionCookieIsSecureBeyondLoopback(t *testing.T) {
	for _, c := range []struct {
		loopback bool
		proto    string
		name     string
		secure   bool
	}{{false, "", secureSessionCookie, true}, {true, "", sessionCookie, false}, {true, "https", secureSessionCookie, true}} {
		s := newTestServer(t, nil)
		s.auth.loopback = c.loopback
		w := post(s.Handler(), "/login", url.Values{"name": {"alice"}, "token": {testToken}}, func(r *http.Request) {
			r.RemoteAddr = "10.0.0.2:5000" // a trusted proxy
			if c.proto != "" {
				r.Header.Set("X-Forwarded-Proto", c.proto)
			}
		})
		cs := w.Result().Cookies()
		if w.Code != http.StatusSeeOther || len(cs) != 1 || cs[0].Name != c.name || cs[0].Secure != c.secure || cs[0].Path != "/" || cs[0].Domain != "" || !cs[0].HttpOnly {
			t.Errorf("loopback %v, proto %q: %d %+v; want %s, secure %v", c.loopback, c.proto, w.Code, cs, c.name, c.secure)
		}
	}
}

// Signing out ends the session on the server: a copy of the cookie taken
// before is refused afterwards; another session of the same operator is
// not.
func TestSignOutRevokesTheSession(t *testing.T) {
	s := newTestServer(t, nil)
	h := s.Handler()
	signIn := func() *http.Cookie {
		w := post(h, "/login", url.Values{"name": {"alice"}, "token": {testToken}}, nil)
		return w.Result().Cookies()[0]
	}
	stolen, other := signIn(), signIn()
	with := func(c *http.Cookie) func(*http.Request) { return func(r *http.Request) { r.AddCookie(c) } }
	as := func(c *http.Cookie) who {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.AddCookie(c)
		return s.auth.identify(r)
	}
	if !as(stolen).CanAct() || !as(other).CanAct() {
		t.Fatal("fresh sessions refused")
	}
	if w := post(h, "/logout", nil, with(stolen)); w.Code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", w.Code)
	}
	if as(stolen).CanAct() {
		t.Error("a copy of the signed-out session still acts")
	}
	if !as(other).CanAct() {
		t.Error("another session of the same operator ended too")
	}
}

// The deny list is bounded: past its bound, the expired are forgotten,
// and if that is not enough the console changes its key, which ends
// every session (never a session signed out but accepted).
func TestRevokedSessionsAreBounded(t *testing.T) {
	s := newTestServer(t, nil)
	keep := httptest.NewRequest(http.MethodPost, "/login", nil)
	c, _ := s.auth.signIn("bob", testToken, keep)
	far := time.Now().Add(time.Hour).Unix()
	for i := range maxRevoked {
		s.auth.revoke(strings.Repeat("x", 8)+string(rune('a'+i%26))+strings.Repeat("y", i/26), far)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.AddCookie(c)
	if !s.auth.identify(r).CanAct() {
		t.Fatal("bob's session ended before the bound was passed")
	}
	s.auth.revoke("one-more", far)
	if s.auth.identify(r).CanAct() || len(s.auth.revoked) != 0 {
		t.Errorf("past the bound: bob acts %v, %d remembered; want every session ended and none remembered", s.auth.identify(r).CanAct(), len(s.auth.revoked))
	}
}
