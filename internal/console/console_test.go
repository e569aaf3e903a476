package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"relay/internal/config"
	"relay/internal/payload"
)

const (
	testToken = "0123456789abcdef-console"
	unset     = "\x00"
)

func newTestServer(t *testing.T, extra map[string]string) *Server {
	t.Helper()
	env := map[string]string{
		config.EnvSourceTopics: "orders", config.EnvBootstrapServers: "127.0.0.1:1", config.EnvTransactionalID: "t",
		config.EnvConsoleToken: testToken, config.EnvConsoleUserHeader: "X-Forwarded-User", config.EnvConsoleTrustedProxy: "10.0.0.0/8",
		config.EnvConsoleTrustUnsigned: "true",
		// The tests' requests come over plain HTTP from beyond loopback;
		// TestTokenInClearIsRefused drops it.
		config.EnvConsoleInsecure: "true",
	}
	for k, v := range extra {
		env[k] = v
		if v == unset {
			delete(env, k)
		}
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, []string{config.EnvBootstrapServers + "=127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func post(h http.Handler, path string, form url.Values, prepare func(*http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	if prepare != nil {
		prepare(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Every action needs an actor; pages carry the security headers.
func TestActionsNeedAnActor(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	for _, path := range []string{"/discard", "/replay/dry-run", "/replay/start", "/replays/rp-x/stop"} {
		w := post(h, path, url.Values{"ids": {"orders/0/1"}, "reason": {"r"}}, nil)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("%s without sign-in: %d, want 401", path, w.Code)
		}
		csp := w.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("CSP %q", csp)
		}
		if w.Header().Get("X-Frame-Options") != "DENY" {
			t.Error("no frame denial")
		}
	}
}

// A sign-in needs the token; the session's form token must come with
// every action; a cross-site request is refused before anything.
func TestSignInAndCSRF(t *testing.T) {
	s := newTestServer(t, nil)
	h := s.Handler()
	if w := post(h, "/login", url.Values{"name": {"alice"}, "token": {"wrong"}}, nil); w.Code != http.StatusUnauthorized || len(w.Result().Cookies()) != 0 {
		t.Fatalf("a wrong token: %d, cookies %v", w.Code, w.Result().Cookies())
	}
	w := post(h, "/login", url.Values{"name": {"alice"}, "token": {testToken}}, nil)
	cookies := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("sign-in: %d, cookies %+v", w.Code, cookies)
	}
	withCookie := func(r *http.Request) { r.AddCookie(cookies[0]) }
	if strings.Contains(w.Body.String(), testToken) {
		t.Error("the token is in a page")
	}
	if w := post(h, "/discard", url.Values{"ids": {"orders/0/1"}, "reason": {"r"}}, withCookie); w.Code != http.StatusForbidden {
		t.Errorf("no CSRF token: %d, want 403", w.Code)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	withCookie(r)
	u := s.auth.identify(r)
	if u.Actor != "alice" || u.How != "token" {
		t.Fatalf("identified %+v", u)
	}
	// With the form token, the request reaches the discard, which names
	// what is wrong with it.
	w = post(h, "/discard", url.Values{"ids": {"orders/0/1"}, "csrf": {u.CSRF()}}, withCookie)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "reason is required") {
		t.Errorf("discard without a reason: %d %s", w.Code, w.Body.String())
	}
	w = post(h, "/discard", url.Values{"ids": {"orders/0/1"}, "csrf": {u.CSRF()}, "reason": {"r"}}, func(r *http.Request) {
		withCookie(r)
		r.Header.Set("Sec-Fetch-Site", "cross-site")
	})
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "another site") {
		t.Errorf("cross-site: %d", w.Code)
	}
}

// A session is the console's signature over the name, the expiry and the
// token in use: forged, expired or made with a rotated token, it is none.
func TestSessionsCannotBeForged(t *testing.T) {
	s := newTestServer(t, nil)
	c, ok := s.auth.signIn("alice", testToken, httptest.NewRequest(http.MethodPost, "/login", nil))
	if !ok {
		t.Fatal("sign-in refused")
	}
	forged := *c
	forged.Value = strings.Replace(c.Value, c.Value[:4], "AAAA", 1)
	other := newTestServer(t, nil) // another key
	for name, tc := range map[string]struct {
		s *Server
		c *http.Cookie
	}{"forged": {s, &forged}, "another console's": {other, c}} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.AddCookie(tc.c)
		if u := tc.s.auth.identify(r); u.CanAct() {
			t.Errorf("%s session accepted as %q", name, u.Actor)
		}
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "token")
	if err := os.WriteFile(f, []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	s = newTestServer(t, map[string]string{config.EnvConsoleToken: unset, config.EnvConsoleToken + "_FILE": f})
	c, _ = s.auth.signIn("bob", testToken, httptest.NewRequest(http.MethodPost, "/login", nil))
	if err := os.WriteFile(f, []byte("a-rotated-token-of-length"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cfg.Console.Token.Reload(); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.AddCookie(c)
	if u := s.auth.identify(r); u.CanAct() {
		t.Error("a session made with the old token outlived its rotation")
	}
}

// The proxy's user header is believed only from the proxy's addresses.
func TestProxyUserOnlyFromTrustedProxies(t *testing.T) {
	s := newTestServer(t, nil)
	for addr, want := range map[string]string{"10.1.2.3:5000": "mallory", "[::ffff:10.1.2.3]:5000": "mallory", "192.168.1.1:5000": "", "127.0.0.1:5000": ""} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = addr
		r.Header.Set("X-Forwarded-User", "mallory\n")
		r.Header.Set("X-Forwarded-For", "10.0.0.1")
		if u := s.auth.identify(r); u.Actor != want {
			t.Errorf("from %s: actor %q, want %q", addr, u.Actor, want)
		}
	}
}

// The user header needs the proxies, and the proxies a header.
func TestConsoleConfigErrors(t *testing.T) {
	env := map[string]string{config.EnvSourceTopics: "orders", config.EnvBootstrapServers: "x:1", config.EnvTransactionalID: "t",
		config.EnvConsoleUserHeader: "X-User", config.EnvConsoleToken: "short", config.EnvQuarantineOwner: "payments=team",
		config.EnvQuarantineThreshold: "x", config.EnvReplayWatchMetrics: "ftp://relay"}
	_, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, []string{config.EnvBootstrapServers + "=x:1"})
	for _, want := range []string{config.EnvConsoleUserHeader, "shorter than 16", `"payments" is not one of`, config.EnvQuarantineThreshold, "not an http(s) URL"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: want %q", err, want)
		}
	}
}

// A discard's way back is a path of the console, never another site.
func TestDiscardGoesBackOnlyToTheConsole(t *testing.T) {
	for back, want := range map[string]bool{"/failures?code=X": true, "//evil.example/x": false, "https://evil.example": false, "/\\evil": false,
		"/\t/evil.example": false, "/%2F/x": false} {
		if got := localPath(back); got != want {
			t.Errorf("%q: %v, want %v", back, got, want)
		}
	}
}

// The payload is redacted as the envelope's error message is.
func TestPayloadIsRedacted(t *testing.T) {
	s := newTestServer(t, map[string]string{config.EnvRedactPattern: "ACME-[0-9]+"})
	text, decoded, why := payload.Render(t.Context(), nil, s.redactor(), []byte(`{"email":"alice@example.com","card":"4111 1111 1111 1111","ref":"ACME-42","token":"abc"}`))
	for _, secret := range []string{"alice@example.com", "4111", "ACME-42", `"abc"`} {
		if strings.Contains(text, secret) {
			t.Errorf("%q shown in %s", secret, text)
		}
	}
	if decoded || why == "" {
		t.Errorf("decoded %v why %q without a registry", decoded, why)
	}
	// Binary (a registry-framed record the registry cannot decode): its
	// size and first bytes, never its content.
	bin := append([]byte{0, 0, 0, 0, 1, 0x12}, "password=hunter2 alice@example.com 4111111111111111 ok-text"...)
	got := payload.Shown(s.redactor(), bin)
	for _, secret := range []string{"hunter2", "alice@example.com", "4111", "ok-text", "68756e74657232"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q shown in %q", secret, got)
		}
	}
	if !strings.Contains(got, "00 00 00 00 01") {
		t.Errorf("binary shown as %q", got)
	}
	// A decoded record: a secret-named field masked whole (an array too),
	// bytes and fixed fields by their redacted text, never base64.
	rec := payload.Sanitize(s.redactor(), map[string]any{"blob": []byte("token=abc123 x"), "fixed": [4]byte{'s', 'e', 'c', 'r'},
		"apiKeys": []any{"k-1", "k-2"}, "note": "mail bob@example.com", "n": 1}).(map[string]any)
	if b, _ := rec["blob"].(string); strings.Contains(b, "abc123") || !strings.Contains(b, "token=") {
		t.Errorf("bytes field shown as %q", rec["blob"])
	}
	if rec["apiKeys"] != "***" || strings.Contains(fmt.Sprint(rec["note"]), "bob@") {
		t.Errorf("secret field %v, note %v", rec["apiKeys"], rec["note"])
	}
	if _, isString := rec["fixed"].(string); !isString {
		t.Errorf("fixed shown as %v", rec["fixed"])
	}
}

func TestReadAudit(t *testing.T) {
	f := filepath.Join(t.TempDir(), "audit.prom")
	text := `# HELP relay_audit_clean x
relay_audit_clean{source="orders"} 0
relay_audit_timestamp_seconds{source="orders"} 1764676800
relay_audit_findings{source="orders",kind="lost"} 2
relay_audit_findings{source="orders",kind="duplicated"} 0
relay_audit_clean{source="refunds"} 1
relay_audit_clean{source="payments"} 0
relay_audit_outcome{outcome="findings",source="payments"} 0
relay_audit_outcome{outcome="incomplete",source="payments"} 1
`
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := readAudit(f)
	if err != nil {
		t.Fatal(err)
	}
	if o := a["orders"]; o == nil || o.Clean || o.Incomplete || o.Findings["lost"] != 2 || o.At.Unix() != 1764676800 || !a["refunds"].Clean {
		t.Fatalf("%+v", a)
	}
	if p := a["payments"]; p == nil || p.Clean || !p.Incomplete {
		t.Fatalf("an incomplete audit: %+v", p)
	}
	if a, err := readAudit(filepath.Join(t.TempDir(), "none")); err != nil || len(a) != 0 {
		t.Fatalf("a missing file: %v %v", a, err)
	}
}

func TestChartCountsInflowAndResolution(t *testing.T) {
	now := time.Now()
	in := []time.Time{now.Add(-50 * time.Minute), now.Add(-10 * time.Minute), now.Add(-time.Minute)}
	c := newChart(in, []time.Time{now.Add(-time.Minute)}, now)
	if c.Window != "the last hour" || c.Inflow != 3 || c.Resolved != 1 || len(c.Bars) != chartBuckets {
		t.Fatalf("%+v", c)
	}
	c = newChart([]time.Time{now.Add(-72 * time.Hour)}, nil, now)
	if c.Window != "the last 7 days" || c.Inflow != 1 {
		t.Fatalf("%+v", c)
	}
}

// On loopback the console answers only to loopback's names: a rebound
// name of another site is refused.
func TestUnknownHostsAreRefused(t *testing.T) {
	s := newTestServer(t, nil)
	s.o.AllowedHosts = []string{"localhost", "127.0.0.1", "::1"}
	h := s.Handler()
	for host, want := range map[string]int{"127.0.0.1:9465": http.StatusOK, "localhost:9465": http.StatusOK, "[::1]:9465": http.StatusOK,
		"evil.example:9465": http.StatusMisdirectedRequest, "evil.example": http.StatusMisdirectedRequest} {
		r := httptest.NewRequest(http.MethodGet, "/login", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %s: %d, want %d", host, w.Code, want)
		}
	}
}

func TestNamesAndMessagesCannotBeSpoofed(t *testing.T) {
	if got := cleanName(" ali\u202ece\u200b\n "); got != "alice" {
		t.Errorf("cleanName kept format or control characters: %q", got)
	}
	if got := cleanName(strings.Repeat("é", 100)); len([]rune(got)) != maxActorName || !utf8Valid(got) {
		t.Errorf("cut %q", got)
	}
	if got := flash(url.Values{"done": {"Your account is locked; call +1 555"}}); got != "" {
		t.Errorf("a link made the page say %q", got)
	}
	if got := flash(url.Values{"done": {"discarded"}, "n": {"3"}}); !strings.Contains(got, "Discarded 3") {
		t.Errorf("flash %q", got)
	}
	if err := checkReason(strings.Repeat("x", maxReason+1)); err == nil {
		t.Error("a reason over the bound was taken")
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "?") == s }

// An IPv4 range written IPv6-mapped is the IPv4 range.
func TestMappedProxyRange(t *testing.T) {
	s := newTestServer(t, map[string]string{config.EnvConsoleTrustedProxy: "::ffff:10.0.0.0/104"})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.9.9.9:1"
	r.Header.Set("X-Forwarded-User", "carol")
	if u := s.auth.identify(r); u.Actor != "carol" {
		t.Errorf("actor %q", u.Actor)
	}
}

// A script acts with the token as a bearer token and a name, without a
// session or a CSRF token; a wrong token or no name is refused.
func TestScriptsActWithTheBearerToken(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	form := url.Values{"ids": {"orders/0/1"}}
	for _, tc := range []struct {
		token, actor string
		want         int
	}{{testToken, "ci-bot", http.StatusBadRequest}, {"wrong-token-of-length", "ci-bot", http.StatusUnauthorized}, {testToken, "", http.StatusUnauthorized}} {
		w := post(h, "/discard", form, func(r *http.Request) {
			r.Header.Del("Sec-Fetch-Site")
			r.Header.Set("Authorization", "Bearer "+tc.token)
			if tc.actor != "" {
				r.Header.Set(ActorHeader, tc.actor)
			}
		})
		// 400: it reached the discard, which wants a reason.
		if w.Code != tc.want {
			t.Errorf("token %q actor %q: %d, want %d: %s", tc.token, tc.actor, w.Code, tc.want, w.Body.String())
		}
	}
}

// A proxy that passes its own bearer token upstream (an OIDC id token)
// does not lock its users out: without Relay-Actor it is not a script's.
func TestAProxysBearerTokenIsNotTheConsoles(t *testing.T) {
	s := newTestServer(t, nil)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.1.1.1:4000"
	r.Header.Set("Authorization", "Bearer eyJhbGciOi.the-proxy's.id-token")
	r.Header.Set("X-Forwarded-User", "dave")
	if u := s.auth.identify(r); u.Actor != "dave" || u.How != "proxy" {
		t.Fatalf("identified %+v, want the proxy's user", u)
	}
}

// Guessing the token is slowed: after 5 wrong ones from an address, even
// the right one waits a minute; other addresses are not affected.
func TestSignInGuessesAreSlowed(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	from := func(addr string) func(*http.Request) { return func(r *http.Request) { r.RemoteAddr = addr } }
	for range maxFailures {
		if w := post(h, "/login", url.Values{"name": {"eve"}, "token": {"guess-guess-guess"}}, from("192.0.2.7:1000")); w.Code != http.StatusUnauthorized {
			t.Fatalf("a wrong token: %d", w.Code)
		}
	}
	if w := post(h, "/login", url.Values{"name": {"eve"}, "token": {testToken}}, from("192.0.2.7:1001")); w.Code != http.StatusTooManyRequests {
		t.Errorf("after %d wrong tokens: %d, want 429", maxFailures, w.Code)
	}
	if w := post(h, "/login", url.Values{"name": {"alice"}, "token": {testToken}}, from("192.0.2.8:1000")); w.Code != http.StatusSeeOther {
		t.Errorf("another address: %d", w.Code)
	}
}
