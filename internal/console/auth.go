package console

import (
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
	"time"
	"unicode"
	"unicode/utf8"
)

// sessionCookie holds a signed-in operator's name and expiry, signed with
// the console's key and the token in use: a rotated token ends every
// session made with the old one.
const (
	sessionCookie = "relay_console_session"
	sessionLife   = 8 * time.Hour
	maxActorName  = 64
)

// who is the requester: their actor name for the ledger, "" when they may
// only read; how says how they were identified.
type who struct {
	Actor string
	How   string // "token", "proxy" or ""
	csrf  string
}

// CanAct says whether the requester may act.
func (w who) CanAct() bool { return w.Actor != "" }

// CSRF is the requester's token for forms.
func (w who) CSRF() string { return w.csrf }

type auth struct {
	// guesses slows the guessing of the token, per client.
	guesses *guesses

	key        []byte
	token      func() string // "" when no token is set
	userHeader string
	proxies    []netip.Prefix
}

func newAuth(token func() string, userHeader string, proxies []netip.Prefix) *auth {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &auth{key: key, token: token, userHeader: userHeader, proxies: proxies, guesses: newGuesses(maxTracked)}
}

func (a *auth) mac(parts ...string) string {
	m := hmac.New(sha256.New, a.key)
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

// identify says who r comes from.
func (a *auth) identify(r *http.Request) who {
	// A script: the token as a bearer token, and a name. A browser never
	// sends these headers across sites without the console's consent (it
	// answers no CORS preflight), so it needs no CSRF token. A bearer
	// token without Relay-Actor is someone else's (a proxy's JWT passed
	// upstream): the other ways are tried.
	// Only on actions (POST): a page read is no place to try tokens.
	if name := cleanName(r.Header.Get(ActorHeader)); name != "" && a.token() != "" && r.Method == http.MethodPost {
		if scheme, bearer, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			if !a.mayTry(r, time.Now()) {
				return who{How: "throttled"}
			}
			right := subtle.ConstantTimeCompare([]byte(strings.TrimSpace(bearer)), []byte(a.token())) == 1
			a.tried(r, right, time.Now())
			if right {
				return who{Actor: name, How: "bearer"}
			}
			return who{How: "refused"}
		}
	}
	if a.userHeader != "" && a.fromProxy(r) {
		if u := cleanName(r.Header.Get(a.userHeader)); u != "" {
			return who{Actor: u, How: "proxy", csrf: a.mac("csrf", "proxy", u)}
		}
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil || a.token() == "" {
		return who{}
	}
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return who{}
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) != 3 {
		return who{}
	}
	name, exp, sig := parts[0], parts[1], parts[2]
	until, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || time.Now().Unix() > until {
		return who{}
	}
	if !hmac.Equal([]byte(sig), []byte(a.mac("session", name, exp, a.tokenTag()))) {
		return who{}
	}
	return who{Actor: name, How: "token", csrf: a.mac("csrf", "token", name, exp)}
}

// fromProxy says whether r's peer is one of the trusted proxies.
func (a *auth) fromProxy(r *http.Request) bool {
	ip, ok := addrOf(r.RemoteAddr)
	return ok && a.trusted(ip)
}

// mayTry says whether r's client may give a token now.
func (a *auth) mayTry(r *http.Request, now time.Time) bool { return a.guesses.mayTry(a.client(r), now) }

// tried notes a token r's client gave, right or wrong.
func (a *auth) tried(r *http.Request, ok bool, now time.Time) { a.guesses.tried(a.client(r), ok, now) }

// secure says whether r reached the console over TLS: its own, or the
// TLS a trusted proxy ended (X-Forwarded-Proto): the session cookie is then
// sent over TLS only.
func (a *auth) secure(r *http.Request) bool {
	return r.TLS != nil || (a.fromProxy(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"))
}

// signIn checks the token and makes the session cookie of name.
func (a *auth) signIn(name, token string, secure bool) (*http.Cookie, bool) {
	want := a.token()
	if want == "" || subtle.ConstantTimeCompare([]byte(token), []byte(want)) != 1 {
		return nil, false
	}
	exp := strconv.FormatInt(time.Now().Add(sessionLife).Unix(), 10)
	v := name + "\x00" + exp + "\x00" + a.mac("session", name, exp, a.tokenTag())
	return &http.Cookie{Name: sessionCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(v)), Path: "/",
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode, MaxAge: int(sessionLife.Seconds())}, true
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
// line, at most maxActorName characters.
func cleanName(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
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
