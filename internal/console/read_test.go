package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/payload"
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

// Pentest findings: a request is identified once, so a wrong bearer
// token spends one guess (the error page asked again, and counted a
// second); and a bearer token is no way to read, a POST /replay/choose
// included (the form it renders shows failures).
func TestIdentifiedOncePerRequest(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	script := func(token string) func(*http.Request) {
		return func(r *http.Request) {
			r.RemoteAddr = "192.0.2.9:4000"
			r.Header.Set("Authorization", "Bearer "+token)
			r.Header.Set(ActorHeader, "bot")
		}
	}
	for i := range maxFailures {
		if w := post(h, "/discard", url.Values{"ids": {"orders/0/1"}, "reason": {"x"}}, script("wrong-token-wrong-token")); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d of %d: %d, want 401 (a wrong token spends one guess, not two)", i+1, maxFailures, w.Code)
		}
	}
	if w := post(h, "/discard", url.Values{"ids": {"orders/0/1"}, "reason": {"x"}}, script("wrong-token-wrong-token")); w.Code != http.StatusTooManyRequests {
		t.Fatalf("after %d wrong tokens: %d, want 429", maxFailures, w.Code)
	}
	h = newTestServer(t, nil).Handler()
	if w := post(h, "/replay/choose", url.Values{"ids": {"orders/0/42"}}, script(testToken)); w.Code != http.StatusUnauthorized {
		t.Fatalf("POST /replay/choose with the right bearer token: %d, want 401 (a bearer token reads nothing)", w.Code)
	}
}

// Pentest finding: behind a proxy that appends to the user header rather
// than replacing it, the client's own value came first and was believed.
// More than one value, as header lines or after a comma, names nobody.
func TestUserHeaderWithMoreThanOneValueNamesNobody(t *testing.T) {
	s := newTestServer(t, nil)
	for name, set := range map[string]func(http.Header){
		"one":       func(h http.Header) { h.Set("X-Forwarded-User", "alice") },
		"two lines": func(h http.Header) { h.Add("X-Forwarded-User", "ceo@corp"); h.Add("X-Forwarded-User", "alice") },
		"a comma":   func(h http.Header) { h.Set("X-Forwarded-User", "ceo@corp, alice") },
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "10.9.9.9:1"
		set(r.Header)
		u := s.auth.identify(r)
		if want := map[bool]string{true: "alice", false: ""}[name == "one"]; u.Actor != want {
			t.Errorf("%s: actor %q, want %q", name, u.Actor, want)
		}
	}
}

// Pentest finding: secrets are compared by their digests, whose length is
// fixed, so that a wrong guess's time says nothing of the token's length.
func TestSameSecret(t *testing.T) {
	for _, c := range []struct {
		got, want string
		same      bool
	}{{"s3cret-token-0123", "s3cret-token-0123", true}, {"s3cret", "s3cret-token-0123", false}, {"", "x", false}, {"s3cret-token-0124", "s3cret-token-0123", false}} {
		if sameSecret(c.got, c.want) != c.same {
			t.Errorf("sameSecret(%q, %q) = %v", c.got, c.want, !c.same)
		}
	}
}

// Pentest finding: the live progress quota was keyed on the client, and
// every user of the authenticating proxy arrives from the proxy: all of
// them shared four streams. A proxy user has a quota of their own.
func TestStreamQuotaIsPerProxyUser(t *testing.T) {
	s := newTestServer(t, nil)
	as := func(user string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/replays/x/events", nil)
		r.RemoteAddr = "10.9.9.9:1"
		r.Header.Set("X-Forwarded-User", user)
		return withIdentity(r)
	}
	alice, bob := s.streamKey(as("alice")), s.streamKey(as("bob"))
	if alice == bob {
		t.Fatalf("alice and bob behind one proxy share the stream quota %q", alice)
	}
	for range maxStreamsPer {
		if code, why := s.streams.open(alice); code != 0 {
			t.Fatalf("alice's streams: %d %s", code, why)
		}
	}
	if code, _ := s.streams.open(bob); code != 0 {
		t.Fatalf("bob after alice's %d streams: %d, want his own quota", maxStreamsPer, code)
	}
}

// Pentest finding: a token holder typed "ceo (console, proxy)" as their
// name, and the ledger's actor read as the proxy's user ceo. A name has
// no brackets: the bracketed provenance is the console's alone.
func TestTypedNameCannotClaimAProvenance(t *testing.T) {
	for _, typed := range []string{"ceo (console, proxy)", "ceo［console, proxy］", "ceo {console, proxy}", "ceo [console, proxy]"} {
		got := actor(who{Actor: cleanName(typed), How: "token"})
		if strings.Count(got, "(") != 1 || !strings.HasSuffix(got, "(console, token)") || strings.ContainsAny(got, "[]{}［］") {
			t.Errorf("typed %q: the ledger says %q", typed, got)
		}
	}
}

// Pentest finding: beyond loopback, a token over plain HTTP was taken
// with a warning at start. Without RELAY_CONSOLE_INSECURE it is refused
// (sign-in and a script's bearer token alike) unless the request came
// over TLS, the console's own or its proxy's (X-Forwarded-Proto); a
// response over TLS says to stay on it (HSTS).
func TestTokenInClearIsRefused(t *testing.T) {
	h := newTestServer(t, map[string]string{config.EnvConsoleInsecure: unset}).Handler()
	from := func(proto string) func(*http.Request) {
		return func(r *http.Request) {
			r.RemoteAddr = "10.0.0.5:4000"
			r.Header.Set("X-Forwarded-For", "203.0.113.10")
			if proto != "" {
				r.Header.Set("X-Forwarded-Proto", proto)
			}
		}
	}
	if w := post(h, "/login", url.Values{"name": {"ann"}, "token": {testToken}}, from("")); w.Code != http.StatusForbidden {
		t.Fatalf("sign-in over plain HTTP: %d, want 403", w.Code)
	}
	bearer := func(r *http.Request) {
		from("http")(r)
		r.Header.Set("Authorization", "Bearer "+testToken)
		r.Header.Set(ActorHeader, "bot")
	}
	if w := post(h, "/discard", url.Values{"ids": {"orders/0/1"}, "reason": {"x"}}, bearer); w.Code != http.StatusForbidden {
		t.Fatalf("a bearer token over plain HTTP: %d, want 403", w.Code)
	}
	w := post(h, "/login", url.Values{"name": {"ann"}, "token": {testToken}}, from("https"))
	if w.Code != http.StatusSeeOther || w.Header().Get("Strict-Transport-Security") == "" {
		t.Fatalf("sign-in over the proxy's TLS: %d, HSTS %q; want signed in, with HSTS", w.Code, w.Header().Get("Strict-Transport-Security"))
	}
}

// A record's header values share one budget: fifteen headers of 64 KiB
// each were redacted on their own, for minutes a view (sixth pentest).
// A secret's header is masked by its name, unread.
func TestHeaderValuesShareOneBudget(t *testing.T) {
	s := newTestServer(t, nil)
	val := []byte(strings.Repeat("leave at the door ", (40<<10)/18)) // 40 KiB
	var hs []kafka.Header
	for i := range 15 {
		hs = append(hs, kafka.Header{Key: fmt.Sprintf("x-h%d", i), Value: val})
	}
	hs = append(hs, kafka.Header{Key: "x-api-key", Value: []byte("k-1234567890abcdef")})
	// A key may hold a secret too: redacted (eighth pentest).
	if got := shownHeaders(t.Context(), s.redactor(), []kafka.Header{{Key: "x-debug password=hunter2-secret", Value: []byte("v")}}); strings.Contains(got[0].Key, "hunter2") {
		t.Errorf("a header key shown as is: %q", got[0].Key)
	}
	got := shownHeaders(t.Context(), s.redactor(), hs)
	// Out of time (the page's budget): the values not checked are not
	// shown; a key longer than a name is cut, its value masked.
	late, cancel := context.WithCancel(t.Context())
	cancel()
	long := strings.Repeat("k", 10000)
	if lateRows := shownHeaders(late, s.redactor(), append(hs[:1:1], kafka.Header{Key: long, Value: []byte("v")})); len(lateRows) != 1 || !strings.Contains(lateRows[0].Value, "2 more headers, not shown") {
		t.Errorf("out of time: %+v", lateRows)
	}
	if rows := shownHeaders(t.Context(), s.redactor(), []kafka.Header{{Key: long, Value: []byte("v")}}); len(rows[0].Key) > envelope.MaxName+len("…") || rows[0].Value != envelope.Mask {
		t.Errorf("a key longer than a name: %.40s = %q", rows[0].Key, rows[0].Value)
	}
	// Many headers: at most maxHeaders, then one row says how many more
	// (4,064 long names took 5 s: ninth pentest).
	var many []kafka.Header
	for i := range 4064 {
		many = append(many, kafka.Header{Key: fmt.Sprintf("%s-%d", strings.Repeat("x-a ", 60), i)})
	}
	if rows := shownHeaders(t.Context(), s.redactor(), many); len(rows) > maxHeaders+1 || !strings.Contains(rows[len(rows)-1].Value, "more headers, not shown") {
		t.Errorf("4,064 headers: %d rows, the last %q", len(rows), rows[len(rows)-1].Value)
	}
	shown := 0
	for _, h := range got[:15] {
		if !strings.Contains(h.Value, "not shown") {
			shown++
		}
	}
	if len(got) != 16 || shown != 1 || got[15].Value != envelope.Mask {
		t.Errorf("15 header values of 40 KiB: %d of %d shown (want 1: the page shows %d bytes of them), x-api-key %q", shown, len(got), payload.MaxShown, got[15].Value)
	}
}

// The help says who may read as the configuration decides it: open on
// loopback, signed-in beyond it, by default (it said "Reading needs
// nothing" after reads beyond loopback needed sign-in).
func TestHelpSaysWhoMayRead(t *testing.T) {
	s := newTestServer(t, map[string]string{config.EnvConsoleReadAuth: unset})
	if s.cfg.Console.ReadsSignedIn(true) || !s.cfg.Console.ReadsSignedIn(false) {
		t.Fatalf("by default: signed-in reads on loopback %v, beyond %v", s.cfg.Console.ReadsSignedIn(true), s.cfg.Console.ReadsSignedIn(false))
	}
	help := strings.Join(strings.Fields(Help), " ")
	for _, want := range []string{"Reading is open on loopback and needs a signed-in operator beyond it", config.EnvConsoleReadAuth, config.EnvConsoleProxySocket} {
		if !strings.Contains(help, want) {
			t.Errorf("relay console --help does not say %q", want)
		}
	}
}
