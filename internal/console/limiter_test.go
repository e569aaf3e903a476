package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Behind an ingress (a trusted proxy), the limiter keys on the client the
// proxy forwarded for: five wrong guesses from one client do not lock
// another out. A forwarded address from an untrusted peer is not believed.
func TestGuessesAreCountedPerForwardedClient(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	via := func(peer, xff string) func(*http.Request) {
		return func(r *http.Request) { r.RemoteAddr = peer; r.Header.Set("X-Forwarded-For", xff) }
	}
	for range maxFailures {
		post(h, "/login", url.Values{"name": {"eve"}, "token": {"guess-guess-guess"}}, via("10.0.0.5:4000", "198.51.100.66, 10.0.0.9"))
	}
	if w := post(h, "/login", url.Values{"name": {"eve"}, "token": {testToken}}, via("10.0.0.5:4001", "198.51.100.66")); w.Code != http.StatusTooManyRequests {
		t.Errorf("the guessing client after %d wrong tokens: %d, want 429", maxFailures, w.Code)
	}
	if w := post(h, "/login", url.Values{"name": {"alice"}, "token": {testToken}}, via("10.0.0.5:4002", "203.0.113.10")); w.Code != http.StatusSeeOther {
		t.Errorf("another client through the same ingress: %d, want signed in", w.Code)
	}
	// An untrusted peer cannot pick its key by a forged header.
	for i := range maxFailures {
		post(h, "/login", url.Values{"name": {"mallory"}, "token": {"guess-guess-guess"}}, via("192.0.2.50:4000", fmt.Sprintf("203.0.113.%d", 100+i)))
	}
	if w := post(h, "/login", url.Values{"name": {"mallory"}, "token": {testToken}}, via("192.0.2.50:4001", "203.0.113.200")); w.Code != http.StatusTooManyRequests {
		t.Errorf("an untrusted peer with a new X-Forwarded-For each time: %d, want 429", w.Code)
	}
}

// IPv6 clients are counted by their /64: a host that holds a whole /64
// cannot take a fresh address for each guess.
func TestIPv6GuessesAreCountedPerSlash64(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	for i := range maxFailures {
		post(h, "/login", url.Values{"name": {"eve"}, "token": {"guess-guess-guess"}},
			func(r *http.Request) { r.RemoteAddr = fmt.Sprintf("[2001:db8:1:2::%x]:4000", i+1) })
	}
	if w := post(h, "/login", url.Values{"name": {"eve"}, "token": {testToken}},
		func(r *http.Request) { r.RemoteAddr = "[2001:db8:1:2:ffff::1]:4000" }); w.Code != http.StatusTooManyRequests {
		t.Errorf("the same /64: %d, want 429", w.Code)
	}
	if w := post(h, "/login", url.Values{"name": {"alice"}, "token": {testToken}},
		func(r *http.Request) { r.RemoteAddr = "[2001:db8:1:3::1]:4000" }); w.Code != http.StatusSeeOther {
		t.Errorf("another /64: %d", w.Code)
	}
}

// A bearer token is looked at only on actions: on a page read it neither
// identifies nor counts. On an action a wrong one counts with the sign-in
// form's, and past the limit even the right one waits.
func TestBearerTokensOnlyOnActionsAndCounted(t *testing.T) {
	s := newTestServer(t, nil)
	h := s.Handler()
	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) {
			r.RemoteAddr = "192.0.2.9:1000"
			r.Header.Set("Authorization", "Bearer "+tok)
			r.Header.Set(ActorHeader, "script")
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	bearer(testToken)(r)
	if u := s.auth.identify(r); u.CanAct() || u.How != "" {
		t.Errorf("a GET with the right bearer token is identified: %+v", u)
	}
	for range 2 * maxFailures {
		r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		bearer("guess-guess-guess")(r)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	if !s.auth.mayTry(r, time.Now()) {
		t.Fatal("wrong bearer tokens on GETs were counted")
	}
	codes := []int{}
	for range maxFailures + 1 {
		w := post(h, "/discard", url.Values{"id": {"orders/0/1"}, "reason": {"x"}}, bearer("guess-guess-guess"))
		codes = append(codes, w.Code)
	}
	if codes[0] != http.StatusUnauthorized || codes[maxFailures] != http.StatusTooManyRequests {
		t.Errorf("wrong bearer tokens on an action: %v, want 401 then 429", codes)
	}
	if w := post(h, "/discard", url.Values{"id": {"orders/0/1"}, "reason": {"x"}}, bearer(testToken)); w.Code != http.StatusTooManyRequests {
		t.Errorf("the right bearer token past the limit: %d, want 429", w.Code)
	}
	// The form and the bearer share one count.
	if w := post(h, "/login", url.Values{"name": {"eve"}, "token": {testToken}}, bearer("x")); w.Code != http.StatusTooManyRequests {
		t.Errorf("sign-in after wrong bearer tokens: %d, want 429", w.Code)
	}
}

// The limiter remembers at most its bound of clients, the least recent
// forgotten first, without a scan; a client's guesses come back with time.
func TestTheLimiterIsBounded(t *testing.T) {
	g := newGuesses(3)
	now := time.Now()
	for _, c := range []string{"a", "b", "c", "d"} {
		for range maxFailures {
			g.tried(c, false, now)
		}
	}
	if g.order.Len() != 3 || len(g.by) != 3 || g.by["a"] == nil || g.by["d"] != nil {
		t.Fatalf("%d clients remembered (%v), want a, b and c: d came when all three still owed guesses", g.order.Len(), strings.Join(keys(g), ","))
	}
	// Found by an attack: a fresh address for every guess (an IPv6 /48
	// holds 65,536 /64s) evicted the clients that owed guesses. While the
	// table is full of them, a new client waits too.
	if g.mayTry("e", now) {
		t.Error("a new client may guess while every client remembered owes guesses")
	}
	later := now.Add(failureWindow)
	if !g.mayTry("e", later) {
		t.Error("a new client may not guess once the debts are paid")
	}
	g.tried("e", false, later)
	if g.by["e"] == nil || g.by["a"] != nil {
		t.Error("once the least recent client owes nothing, it is forgotten for a new one")
	}
	if g.mayTry("c", now) {
		t.Error("c may try after its guesses")
	}
	if !g.mayTry("c", now.Add(failureWindow/maxFailures)) {
		t.Error("c may not try after a guess's worth of time")
	}
	g.tried("c", true, now)
	if g.by["c"] != nil {
		t.Error("a right token does not forget the client's past")
	}
}

func keys(g *guesses) []string {
	var out []string
	for k := range g.by {
		out = append(out, k)
	}
	return out
}

// A client making requests faster than the bound gets 429 with
// Retry-After; another client, and the health check, are not affected.
func TestRequestsPerClientAreBounded(t *testing.T) {
	h := newTestServer(t, nil).Handler()
	from := func(addr string) func(*http.Request) { return func(r *http.Request) { r.RemoteAddr = addr } }
	limited := 0
	for range requestBurst + 20 {
		if w := get(h, "/login", from("192.0.2.30:1")); w.Code == http.StatusTooManyRequests {
			limited++
			if w.Header().Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		}
	}
	if limited == 0 {
		t.Fatalf("%d requests at once were all served", requestBurst+20)
	}
	if w := get(h, "/login", from("192.0.2.31:1")); w.Code != http.StatusOK {
		t.Errorf("another client: %d", w.Code)
	}
	if w := get(h, "/healthz", from("192.0.2.30:1")); w.Code != http.StatusOK {
		t.Errorf("the health check of a limited client: %d", w.Code)
	}
}

// Live progress streams are bounded per session and overall.
func TestStreamsAreBounded(t *testing.T) {
	s := newStreams()
	for range maxStreamsPer {
		if code, _ := s.open("a"); code != 0 {
			t.Fatal("a stream within the bound refused")
		}
	}
	if code, _ := s.open("a"); code != http.StatusTooManyRequests {
		t.Errorf("one stream too many for a session: %d", code)
	}
	s.close("a")
	if code, _ := s.open("a"); code != 0 {
		t.Error("a stream after one closed refused")
	}
	for i := 0; s.all < maxStreams; i++ {
		if code, _ := s.open(fmt.Sprint("s", i)); code != 0 {
			t.Fatalf("stream %d refused below the overall bound", s.all)
		}
	}
	if code, _ := s.open("b"); code != http.StatusServiceUnavailable {
		t.Errorf("past the overall bound: %d", code)
	}
}

// Pentest finding: an ingress that passes the client's own
// X-Forwarded-For lets a guesser pick a new key per guess, and every
// client's limit passes. Past maxWrongInAll wrong tokens from everyone
// together the console takes no token from anyone, the right one
// included, says so in its metrics, and a signed-in session reads on.
func TestWrongTokensFromEveryoneAreCapped(t *testing.T) {
	s := newTestServer(t, nil)
	h := s.Handler()
	via := func(xff string) func(*http.Request) {
		return func(r *http.Request) { r.RemoteAddr = "10.0.0.5:4000"; r.Header.Set("X-Forwarded-For", xff) }
	}
	w := post(h, "/login", url.Values{"name": {"alice"}, "token": {testToken}}, via("203.0.113.10"))
	if w.Code != http.StatusSeeOther {
		t.Fatalf("alice's sign-in: %d", w.Code)
	}
	session := w.Result().Cookies()[0]
	for i := range maxWrongInAll {
		if w := post(h, "/login", url.Values{"name": {"eve"}, "token": {"guess-guess-guess"}}, via(fmt.Sprintf("198.51.%d.%d", i/200, i%200))); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d from its own client: %d, want 401", i+1, w.Code)
		}
	}
	if w := post(h, "/login", url.Values{"name": {"bob"}, "token": {testToken}}, via("203.0.113.20")); w.Code != http.StatusTooManyRequests {
		t.Fatalf("the right token after %d wrong ones from everywhere: %d, want 429", maxWrongInAll, w.Code)
	}
	if w := get(h, "/nope", func(r *http.Request) { via("203.0.113.10")(r); r.AddCookie(session) }); w.Code != http.StatusNotFound {
		t.Fatalf("alice's session during the lock: %d, want through to the page (404)", w.Code)
	}
	m := get(h, "/metrics", func(r *http.Request) { r.RemoteAddr = "192.0.2.77:9000" }).Body.String()
	for _, want := range []string{fmt.Sprintf("relay_console_wrong_tokens_total %d", maxWrongInAll), "relay_console_tokens_locked 1", "relay_console_tokens_refused_total 1"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}
	if w := get(h, "/metrics", via("203.0.113.10")); w.Code != http.StatusNotFound {
		t.Errorf("/metrics through the ingress: %d, want 404", w.Code)
	}
}

// Pentest findings on the cap of tokens from everyone: the lock lasted a
// second (a token bucket refills), so a guess a second went on, 86,400 a
// day; and a try was checked before it was counted, so concurrent guesses
// passed the cap. A try now takes its place at once, a right token gives
// it back, and when none is left no token is taken for lockFor.
func TestEveryonesCapLocksAndCountsAtOnce(t *testing.T) {
	e := newEveryone()
	now := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 4 * maxWrongInAll {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, ok, _ := e.reserve(now); ok {
				mu.Lock()
				passed++
				mu.Unlock()
				e.release(res, false, now)
			}
		}()
	}
	wg.Wait()
	if passed != maxWrongInAll {
		t.Fatalf("%d concurrent wrong tokens checked, want %d", passed, maxWrongInAll)
	}
	for _, after := range []time.Duration{time.Second, time.Minute, lockFor - time.Second} {
		if _, ok, _ := e.reserve(now.Add(after)); ok {
			t.Fatalf("a token taken %s after the lock began; want none for %s", after, lockFor)
		}
	}
	if _, ok, _ := e.reserve(now.Add(lockFor + time.Second)); !ok {
		t.Fatalf("no token taken once the lock ended")
	}

	right := newEveryone()
	for i := range 4 * maxWrongInAll {
		res, ok, _ := right.reserve(now)
		if !ok {
			t.Fatalf("right token %d refused: right tokens must not use up the cap", i)
		}
		right.release(res, true, now)
	}
}

// Repeat pentest finding: one wrong token a second, from 20 addresses in
// turn, never emptied everyone's tries when they came back one a second,
// so the lock never began: 960 guesses in 16 minutes. They come back one
// every 15 s now: such a guesser is locked out within about a minute, and
// passes about maxWrongInAll in 16 minutes.
func TestPacedGuessesFromManyClientsLock(t *testing.T) {
	a := newAuth(func() string { return "k3Vq9-Zt7pLx2Rm8Wc" }, "", nil, false)
	start := time.Now()
	passed, firstLock := 0, time.Duration(0)
	for i := range 16 * 60 {
		now := start.Add(time.Duration(i) * time.Second)
		r := httptest.NewRequest(http.MethodPost, "/login", nil)
		r.RemoteAddr = fmt.Sprintf("198.51.100.%d:4000", i%20)
		r = withIdentity(r)
		if !a.mayTry(r, now) {
			if firstLock == 0 {
				firstLock = time.Duration(i) * time.Second
			}
			continue
		}
		a.tried(r, false, now)
		passed++
	}
	if firstLock == 0 || firstLock > 2*time.Minute || passed > maxWrongInAll+int(2*time.Minute/(lockFor/maxWrongInAll)) {
		t.Fatalf("%d wrong tokens checked in 16 minutes, the first lock after %s; want about %d, locked within 2 minutes", passed, firstLock, maxWrongInAll)
	}
}
