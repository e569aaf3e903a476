package envelope

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Mask replaces whatever redaction removes.
const Mask = "***"

// Names that hold secrets, as patterns: a name holding a stem anywhere,
// ending in key or keys, or made of a word of its own (a separator, or
// nothing, on each side of it).
const (
	secretStems = `api[_.-]?key|apikey|access[_.-]?key|token|secret|pass|pwd|auth|cred|private|session|cookie|bearer|signature|hmac|security[_.-]?code`
	secretWords = `pw|pin|sig|otp|totp|hotp|ssn|cvv2?|cvc2?|iban|salt`
	nameRE      = `[a-z0-9_.-]*(?:` + secretStems + `)[a-z0-9_.-]*|[a-z0-9_.-]*keys?|(?:[a-z0-9_.-]*[_.-])?(?:` + secretWords + `)(?:[_.-]?code)?`
	// sepRE is what stands between a name and its value: = : => and
	// their percent-encoded forms, after the name's closing quote.
	sepRE = `(\\?["']?\s*(?:=>|[=:]|%3[da])\s*)`
)

// builtin are the patterns redacted from every error message: what a
// dependency's error text is known to echo back. Order matters: URL
// credentials before e-mail addresses (user:pass@host looks like one),
// the Authorization header before names and values.
var builtin = []struct {
	re   *regexp.Regexp
	repl string
}{
	// A PEM block (a private key, a certificate), whole, or from its
	// BEGIN line to the end when it was cut.
	{regexp.MustCompile(`-----BEGIN [A-Z0-9 ]+-----(?:[\s\S]*?-----END [A-Z0-9 ]+-----|[\s\S]*$)`), Mask},
	// A JSON Web Token: three base64url parts, the first a JSON header.
	{regexp.MustCompile(`\beyJ[A-Za-z0-9_-]+\s*\.\s*[A-Za-z0-9_-]+\s*\.\s*[A-Za-z0-9_-]*`), Mask},
	// scheme://user:password@host → scheme://***@host, up to the last @
	// before the host: a password may hold one (p@ss).
	{regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s?#]*@`), "${1}" + Mask + "@"},
	// <password>…</password> (XML, SOAP, HTML forms): the element's text,
	// CDATA included.
	{regexp.MustCompile(`(?i)(<(?:[a-z0-9_.-]*:)?(?:` + nameRE + `)(?:\s[^>]*)?>)(?:<!\[CDATA\[[\s\S]*?\]\]>|[^<]*)`), "${1}" + Mask},
	// <property name="db.password">…</property>, <entry key="password">
	{regexp.MustCompile(`(?i)(<[a-z0-9_:.-]+\s[^>]*\b(?:name|key)\s*=\s*["'](?:` + nameRE + `)["'][^>]*>)(?:<!\[CDATA\[[\s\S]*?\]\]>|[^<]*)`), "${1}" + Mask},
	// ... and its value="…" attribute
	{regexp.MustCompile(`(?i)(\b(?:name|key)\s*=\s*["'](?:` + nameRE + `)["']\s+value\s*=\s*)(["'])[^"']*(["'])`), "${1}${2}" + Mask + "${3}"},
	// Authorization: <scheme> <credentials>, whatever the scheme (Token,
	// ApiKey, SSWS, Digest...): quoted, the whole quoted value; else the
	// scheme and the credential after it.
	{regexp.MustCompile(`(?i)\b((?:proxy-)?authorization\\?["']?\s*[:=]\s*)(\\?["'])(?:[^"'\\]|\\[^"'])*(\\?["'])`), "${1}${2}" + Mask + "${3}"},
	{regexp.MustCompile(`(?i)\b((?:proxy-)?authorization\s*[:=]\s*)(?:[a-z][a-z0-9-]*\s+)?[^\s"',;]+`), "${1}" + Mask},
	// Bearer <token>, Basic <creds>, anywhere
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+`), "${1} " + Mask},
	// name=value, name: value, name => value (Ruby) and name%3Dvalue
	// (form-encoded, percent-encoded again) for names that hold secrets:
	// a quoted value whole (spaces and all), a [list] or {map} whole,
	// else up to a space or a quote.
	{regexp.MustCompile(`(?i)\b(` + nameRE + `)` + sepRE + `(\\?")(?:[^"\\]|\\[^"])*(\\?")`), "${1}${2}${3}" + Mask + "${4}"},
	{regexp.MustCompile(`(?i)\b(` + nameRE + `)` + sepRE + `'[^']*'`), "${1}${2}'" + Mask + "'"},
	{regexp.MustCompile(`(?i)\b(` + nameRE + `)` + sepRE + `(?:\[[^\]]*\]|\{[^}]*\})`), "${1}${2}" + Mask},
	{regexp.MustCompile(`(?i)\b(` + nameRE + `)` + sepRE + `[^\s"'\\<\[{]+`), "${1}${2}" + Mask},
	// e-mail addresses
	{regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`), Mask},
	// card-like numbers: 13 to 19 digits, optionally grouped by spaces or dashes
	{regexp.MustCompile(`\b(?:\d[ -]?){12,18}\d\b`), Mask},
}

// authLine is an Authorization header on a line of its own (a header
// dump): the rest of its line is masked before lines are joined.
var authLine = regexp.MustCompile(`(?im)^(\s*(?:proxy-)?authorization\s*:\s*)\S.*$`)

// secretName matches the names of fields and headers that hold secrets:
// any name with pass, secret, token, private, session, cred, auth,
// cookie, pwd, bearer, signature, hmac, access key or security code in
// it, any name that ends in key or keys (apiKey, privateKey,
// signing_keys), and pw, pin, sig, otp, totp, hotp, ssn, cvv, cvc, iban
// and salt as a word of their own (alone, after a separator, or a
// capital: userPin, userPIN, PIN_CODE, otp_secret, cvv2).
var (
	secretName = regexp.MustCompile(`(?i)(?:` + secretStems + `|keys?$|(?:^|[_.-])(?:` + secretWords + `)(?:[_.-]?code)?(?:$|[_.-]))`)
	secretWord = regexp.MustCompile(`(?:^|[a-z0-9])(?:Pw|PW|Pin|PIN|Sig|SIG|Otp|OTP|Totp|TOTP|Hotp|HOTP|Ssn|SSN|Cvv2?|CVV2?|Cvc2?|CVC2?|Iban|IBAN|Salt|SALT)(?:$|[A-Z0-9_.-])|^(?:pw|pin|sig|otp|totp|hotp|ssn|cvv2?|cvc2?|iban|salt)[A-Z0-9]`)
)

// SecretName says whether a field or header called name holds a secret:
// what shows it masks its whole value.
func SecretName(name string) bool {
	return secretName.MatchString(name) || secretWord.MatchString(name)
}

// Redactor removes secrets and personal data from error messages and bounds
// their length. The zero value is not usable: use NewRedactor.
type Redactor struct {
	extra *regexp.Regexp
	max   int
}

// NewRedactor redacts the builtin patterns plus extra (nil for none) and
// cuts messages to at most max bytes.
func NewRedactor(extra *regexp.Regexp, max int) *Redactor {
	return &Redactor{extra: extra, max: max}
}

// Max is r cutting at n bytes instead.
func (r *Redactor) Max(n int) *Redactor { return &Redactor{extra: r.extra, max: n} }

// Redact returns msg without secrets, on one line, at most max bytes.
func (r *Redactor) Redact(msg string) string {
	msg = strings.ToValidUTF8(msg, "?")
	msg = authLine.ReplaceAllString(msg, "${1}"+Mask)
	msg = strings.Join(strings.Fields(msg), " ") // no newlines, no stack traces
	for _, b := range builtin {
		msg = b.re.ReplaceAllString(msg, b.repl)
	}
	if r.extra != nil {
		msg = r.extra.ReplaceAllString(msg, Mask)
	}
	return truncate(msg, r.max)
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
