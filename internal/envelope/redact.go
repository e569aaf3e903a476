package envelope

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Mask replaces whatever redaction removes.
const Mask = "***"

// builtin are the patterns redacted from every error message: what a
// dependency's error text is known to echo back. Order matters: URL
// credentials before e-mail addresses (user:pass@host looks like one).
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
	// <password>…</password> (XML, SOAP, HTML forms): the element's text.
	{regexp.MustCompile(`(?i)(<(?:[a-z0-9_.-]*:)?(?:[a-z0-9_.-]*(?:api[_.-]?key|apikey|token|secret|pass|pwd|auth|cred|private|session|cookie|bearer|signature|hmac)[a-z0-9_.-]*|pw|pin|sig|otp|ssn|cvv|cvc|iban|salt)(?:\s[^>]*)?>)[^<]*`), "${1}" + Mask},
	// Authorization: Bearer <token>, Basic <creds>
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+`), "${1} " + Mask},
	// key=value, key: value, key => value (Ruby) and key%3Dvalue
	// (form-encoded, percent-encoded again) for names that hold secrets
	{regexp.MustCompile(`(?i)\b([a-z0-9_.-]*(?:api[_.-]?key|apikey|access[_.-]?key|token|secret|pass|pwd|auth|cred|private|session|cookie|bearer|signature|hmac)[a-z0-9_.-]*|[a-z0-9_.-]*keys?|(?:[a-z0-9_.-]*[_.-])?(?:pw|pin|sig|otp|ssn|cvv|cvc|iban|salt)(?:[_.-]?code)?)(\\?["']?\s*(?:=>|[=:]|%3[da])\s*\\?["']?)[^\s"'&,;\\<]+`), "${1}${2}" + Mask},
	// e-mail addresses
	{regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`), Mask},
	// card-like numbers: 13 to 19 digits, optionally grouped by spaces or dashes
	{regexp.MustCompile(`\b(?:\d[ -]?){12,18}\d\b`), Mask},
}

// secretName matches the names of fields and headers that hold secrets:
// any name with pass, secret, token, private, session, cred, auth,
// cookie, pwd, bearer, signature, hmac or access key in it, any name that
// ends in key or keys (apiKey, privateKey, signing_keys), and pw, pin,
// sig, otp, ssn, cvv, cvc, iban and salt as a word of their own (alone,
// after a separator, or a capital: userPin, PIN_CODE, otp_secret).
var (
	secretName = regexp.MustCompile(`(?i)(?:pass|secret|token|private|session|cred|auth|cookie|pwd|bearer|signature|hmac|access[_.-]?key|keys?$|(?:^|[_.-])(?:pw|pin|sig|otp|ssn|cvv|cvc|iban|salt)(?:[_.-]?code)?(?:$|[_.-]))`)
	secretWord = regexp.MustCompile(`(?:^|[a-z0-9])(?:Pw|Pin|Sig|Otp|Ssn|Cvv|Cvc|Iban|Salt)(?:$|[A-Z_.-])|^(?:pw|pin|sig|otp|ssn|cvv|cvc|iban|salt)[A-Z]`)
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

// Redact returns msg without secrets, on one line, at most max bytes.
func (r *Redactor) Redact(msg string) string {
	msg = strings.ToValidUTF8(msg, "?")
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
