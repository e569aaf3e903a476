package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/time/rate"
)

// sessionCookie holds a signed-in operator's name and expiry, signed with
// the console's key and the token in use: a rotated token ends every
// session made with the old one.
// Beyond loopback the cookie is Secure and has the __Host- prefix: a
// browser then keeps it to this origin over TLS, unset by any other.
const (
	sessionCookie       = "relay_console_session"
	secureSessionCookie = "__Host-" + sessionCookie
	sessionLife         = 8 * time.Hour
	maxActorName        = 64
	maxRevoked          = 10000 // signed-out sessions remembered until they expire
)

// who is the requester: their actor name for the ledger, "" when they may
// only read; how says how they were identified.
type who struct {
	Actor string
	How   string // "token", "proxy", "bearer" or ""; "refused", "throttled" for a wrong bearer token
	csrf  string
	// session is the signature of a signed-in operator's session.
	session string
}

// CanAct says whether the requester may act.
func (w who) CanAct() bool { return w.Actor != "" }

// CSRF is the requester's token for forms.
func (w who) CSRF() string { return w.csrf }

type auth struct {
	// guesses slows the guessing of the token, per client; all, from
	// every client together.
	guesses *guesses
	all     *everyone

	// mu guards key and revoked: a signed-out session is refused until
	// it expires (one replica's memory: another replica would take it).
	mu         sync.Mutex
	revoked    map[string]int64 // session signature → its expiry (Unix)
	loopback   bool             // the console listens on loopback only
	key        []byte
	token      func() string // "" when no token is set
	userHeader string
	proxies    []netip.Prefix
	forwarders []netip.Prefix // believed for X-Forwarded-For and -Proto only
	// onLock is told when the console stops taking tokens from anyone.
	onLock func()
	// insecure: RELAY_CONSOLE_INSECURE (a token over plain HTTP).
	insecure bool
}

func newAuth(token func() string, userHeader string, proxies []netip.Prefix, loopback bool) *auth {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &auth{key: key, token: token, userHeader: userHeader, proxies: proxies, guesses: newGuesses(maxTracked), all: newEveryone(), revoked: map[string]int64{}, loopback: loopback}
}

func (a *auth) mac(parts ...string) string {
	a.mu.Lock()
	key := a.key
	a.mu.Unlock()
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

func (a *auth) tokenTag() string {
	sum := sha256.Sum256([]byte(a.token()))
	return hex.EncodeToString(sum[:8])
}

// ActorHeader names the actor of a request authorised by the token in
// its Authorization header (a script's, not a browser's).
const ActorHeader = "Relay-Actor"

// identity holds, in a request's context, who the request comes from,
// once identify has said it: a request is identified once (a wrong
// bearer token counts one guess, whoever asks again, the error page
// included).
type identity struct {
	known bool
	who   who
	// reserved is the try at a token taken from everyone's limit,
	// given back when the token was right.
	reserved *rate.Reservation
}

type identityKey struct{}

// withIdentity gives r a place for its identity (Handler's outermost
// step).
func withIdentity(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), identityKey{}, &identity{}))
}

// identify says who r comes from, the first time it is asked for r.
func (a *auth) identify(r *http.Request) who {
	id, _ := r.Context().Value(identityKey{}).(*identity)
	if id == nil {
		return a.identifyNow(r)
	}
	if !id.known {
		id.who, id.known = a.identifyNow(r), true
	}
	return id.who
}

// identifyNow says who r comes from.
func (a *auth) identifyNow(r *http.Request) who {
	// A script: the token as a bearer token, and a name. A browser never
	// sends these headers across sites without the console's consent (it
	// answers no CORS preflight), so it needs no CSRF token. A bearer
	// token without Relay-Actor is someone else's (a proxy's JWT passed
	// upstream): the other ways are tried.
	// Only on a script's actions (POST): a page read, /replay/choose's
	// included, is no place to try tokens, and a bearer token reads
	// nothing.
	if name := cleanName(r.Header.Get(ActorHeader)); name != "" && a.token() != "" && r.Method == http.MethodPost && scriptAction(r.URL.Path) {
		if scheme, bearer, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			if a.inClear(r) {
				return who{How: "in clear"}
			}
			if !a.mayTry(r, time.Now()) {
				return who{How: "throttled"}
			}
			right := sameSecret(strings.TrimSpace(bearer), a.token())
			a.tried(r, right, time.Now())
			if right {
				return who{Actor: name, How: "bearer"}
			}
			return who{How: "refused"}
		}
	}
	if a.userHeader != "" && (viaSocket(r) || a.fromProxy(r)) {
		// One value only: a proxy that appends to the client's header
		// instead of replacing it would pass the client's first (as a
		// second header line, or after a comma in one).
		if vs := r.Header.Values(a.userHeader); len(vs) == 1 && !strings.Contains(vs[0], ",") {
			if u := cleanName(vs[0]); u != "" {
				return who{Actor: u, How: "proxy", csrf: a.mac("csrf", "proxy", u)}
			}
		}
	}
	name, _, sig, ok := a.session(r)
	if !ok {
		return who{}
	}
	return who{Actor: name, How: "token", csrf: a.mac("csrf", "token", sig), session: sig}
}

// cookieName is the session cookie's name for r: with the __Host- prefix
// when the cookie is Secure.
func (a *auth) cookieName(r *http.Request) string {
	if a.secure(r) {
		return secureSessionCookie
	}
	return sessionCookie
}

// session reads r's session cookie: valid when signed by this console
// with the token in use, not expired and not signed out.
func (a *auth) session(r *http.Request) (name, exp, sig string, ok bool) {
	c, err := r.Cookie(a.cookieName(r))
	if err != nil || a.token() == "" {
		return "", "", "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return "", "", "", false
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) != 4 {
		return "", "", "", false
	}
	name, exp, nonce := parts[0], parts[1], parts[2]
	sig = parts[3]
	until, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || time.Now().Unix() > until {
		return "", "", "", false
	}
	if !hmac.Equal([]byte(sig), []byte(a.mac("session", name, exp, nonce, a.tokenTag()))) {
		return "", "", "", false
	}
	a.mu.Lock()
	_, out := a.revoked[sig]
	a.mu.Unlock()
	return name, exp, sig, !out
}

// revoke refuses the session signed sig from now until it expires. When
// too many are remembered, the expired are forgotten; if still too many,
// the console changes its signing key, which ends every session.
func (a *auth) revoke(sig string, until int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now().Unix()
	if len(a.revoked) >= maxRevoked {
		for s, exp := range a.revoked {
			if exp < now {
				delete(a.revoked, s)
			}
		}
	}
	if len(a.revoked) >= maxRevoked {
		a.key = make([]byte, 32)
		_, _ = rand.Read(a.key)
		clear(a.revoked)
		return
	}
	a.revoked[sig] = until
}

// proxySocket marks, in a connection's context, the authenticating
// proxy's Unix socket (RELAY_CONSOLE_PROXY_SOCKET).
type proxySocket struct{}

// viaSocket says whether r came in on the proxy's socket.
func viaSocket(r *http.Request) bool {
	v, _ := r.Context().Value(proxySocket{}).(bool)
	return v
}

// forwarded says whether r's peer may say who the client is and whether
// it used TLS (X-Forwarded-For, X-Forwarded-Proto): the proxy's socket, a
// trusted proxy, or a forwarder (RELAY_CONSOLE_FORWARDED_BY).
func (a *auth) forwarded(r *http.Request) bool {
	if viaSocket(r) {
		return true
	}
	ip, ok := addrOf(r.RemoteAddr)
	return ok && (a.trusted(ip) || a.forwarder(ip))
}

// fromProxy says whether r's peer is one of the trusted proxies.
func (a *auth) fromProxy(r *http.Request) bool {
	ip, ok := addrOf(r.RemoteAddr)
	return ok && a.trusted(ip)
}

// mayTry says whether r's client may give a token now.
func (a *auth) mayTry(r *http.Request, now time.Time) bool {
	if !a.guesses.mayTry(a.client(r), now) {
		a.all.refused.Inc()
		return false
	}
	res, ok, started := a.all.reserve(now)
	if started && a.onLock != nil {
		a.onLock()
	}
	if id, _ := r.Context().Value(identityKey{}).(*identity); id != nil {
		id.reserved = res
	}
	return ok
}

// tried notes a token r's client gave, right or wrong.
func (a *auth) tried(r *http.Request, ok bool, now time.Time) {
	a.guesses.tried(a.client(r), ok, now)
	var res *rate.Reservation
	if id, _ := r.Context().Value(identityKey{}).(*identity); id != nil {
		res, id.reserved = id.reserved, nil
	}
	a.all.release(res, ok, now)
}

// overTLS says whether r came over TLS: the console's own, or the TLS a
// proxy it trusts ended (X-Forwarded-Proto).
func (a *auth) overTLS(r *http.Request) bool {
	return r.TLS != nil || (a.forwarded(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"))
}

// inClear says whether a token given in r would have crossed the network
// in clear: beyond loopback, not over TLS, unless RELAY_CONSOLE_INSECURE.
func (a *auth) inClear(r *http.Request) bool { return !a.loopback && !a.insecure && !a.overTLS(r) }

// secure says whether r's session cookie is Secure (sent over TLS only,
// with the __Host- prefix): always beyond loopback, and on loopback when
// r came over TLS, its own or the TLS a trusted proxy ended
// (X-Forwarded-Proto).
func (a *auth) secure(r *http.Request) bool {
	return !a.loopback || r.TLS != nil || (a.forwarded(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"))
}

// signIn checks the token and makes the session cookie of name.
func (a *auth) signIn(name, token string, r *http.Request) (*http.Cookie, bool) {
	want := a.token()
	if want == "" || !sameSecret(token, want) {
		return nil, false
	}
	exp := strconv.FormatInt(time.Now().Add(sessionLife).Unix(), 10)
	n := make([]byte, 12) // each session its own, so that one can be signed out alone
	_, _ = rand.Read(n)
	nonce := hex.EncodeToString(n)
	v := name + "\x00" + exp + "\x00" + nonce + "\x00" + a.mac("session", name, exp, nonce, a.tokenTag())
	return &http.Cookie{Name: a.cookieName(r), Value: base64.RawURLEncoding.EncodeToString([]byte(v)), Path: "/",
		HttpOnly: true, Secure: a.secure(r), SameSite: http.SameSiteStrictMode, MaxAge: int(sessionLife.Seconds())}, true
}

// sameSecret compares two secrets in a time that says nothing of either,
// their lengths included: ConstantTimeCompare returns at once on a length
// mismatch, so it compares their digests.
func sameSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// checkCSRF says whether the form's token is the requester's (a script
// with the bearer token needs none).
func checkCSRF(w who, r *http.Request) bool {
	if w.How == "bearer" {
		return true
	}
	got := r.PostFormValue("csrf")
	return w.csrf != "" && subtle.ConstantTimeCompare([]byte(got), []byte(w.csrf)) == 1
}

// cleanName keeps a name fit for the ledger: printable (no control nor
// format characters, which could make one name look like another), one
// line, at most maxActorName characters, and without brackets: the
// ledger's actor is the name and then, in brackets, how the console
// identified them ("ann (console, token)"), which only the console writes
// (a name typed beside the token cannot claim "(console, proxy)").
func cleanName(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError || unicode.Is(unicode.Ps, r) || unicode.Is(unicode.Pe, r) {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > maxActorName {
		s = strings.TrimSpace(string(r[:maxActorName]))
	}
	return s
}
