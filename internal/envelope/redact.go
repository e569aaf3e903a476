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
	// pass, auth and cred only where they are not passengers, compass,
	// authors or credits.
	secretStems = `api[_.-]?key|apikey|access[_.-]?key|token|secret|passw(?:or)?d|passphrase|passcode|pass\b|pass[_.-]|[_.-]pass|pwd|auth(?:$|[^o]|o$)|authoriz|authent|cred(?:$|[^i])|credential|private|session|cookie|bearer|signature|hmac|security[_.-]?(?:code|answer)|social[_.-]?security|sessid|recovery[_.-]?codes?|backup[_.-]?codes?|verification[_.-]?code|mfa[_.-]?code|code[_.-]?verifier|mnemonic`
	secretWords = `pw|pin|sig|sid|otp|totp|hotp|ssn|cvv2?|cvc2?|iban|salt`
	nameRE      = `[a-z0-9_.-]*(?:` + secretStems + `)[a-z0-9_.-]*|[a-z0-9_.-]*keys?|(?:[a-z0-9_.-]*(?:[_.-]|%5b))?(?:` + secretWords + `)(?:[_.-]?code)?`
	// sepRE is what stands between a name and its value: = : => and
	// their percent-encoded forms, after the name's closing quote.
	sepRE = `(\\?["'\]]?(?:%5d)?\s*(?:=>|[=:]|%3[da])\s*)`
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
	{regexp.MustCompile(`(?i)(<(?:[a-z0-9_.-]*:)?(?:` + nameRE + `)(?:\s[^>]*)?>)(?:<!\[CDATA\[(?:[^\]]|\][^\]]|\]\][^>])*(?:\]\]>)?|[^<]*)`), "${1}" + Mask},
	// <property name="db.password">…</property>, <entry key="password">
	{regexp.MustCompile(`(?i)(<[a-z0-9_:.-]+\s[^>]*\b(?:name|key)\s*=\s*["'](?:` + nameRE + `)["'][^>]*>)(?:<!\[CDATA\[(?:[^\]]|\][^\]]|\]\][^>])*(?:\]\]>)?|[^<]*)`), "${1}" + Mask},
	// <name>fs.s3a.secret.key</name><value>…</value> (Hadoop's *-site.xml)
	{regexp.MustCompile(`(?i)(<name>\s*(?:` + nameRE + `)\s*</name>\s*<value>)[^<]*`), "${1}" + Mask},
	// ... and its value="…" attribute
	{regexp.MustCompile(`(?i)(\b(?:name|key)\s*=\s*["'](?:` + nameRE + `)["']\s+value\s*=\s*)(["'])[^"']*(["'])`), "${1}${2}" + Mask + "${3}"},
	// Authorization: <scheme> <credentials>, whatever the scheme (Token,
	// ApiKey, SSWS, Digest...): quoted, the whole quoted value; else the
	// scheme and the credential after it.
	{regexp.MustCompile(`(?i)\b((?:proxy-)?authorization\\?["']?\s*[:=]\s*)(\\?["'])(?:[^"'\\]|\\[^"'])*(\\?["'])`), "${1}${2}" + Mask + "${3}"},
	{regexp.MustCompile(`(?i)\b((?:proxy-)?authorization\s*[:=]\s*)(?:[a-z][a-z0-9-]*\s+)?[^\s"',;]+`), "${1}" + Mask},
	// Cookie: a=b; sid=… on a line with more after it (a log line): every
	// pair (the header on a line of its own is masked to its end before
	// lines are joined).
	{regexp.MustCompile(`(?i)\b((?:set-)?cookie\s*:\s*)[^=\s;]+=[^;\s]*(?:;\s*[^=\s;]+=[^;\s]*)*`), "${1}" + Mask},
	// A name/value pair whose name is a secret's, written out: a Go
	// struct ({Name:DB_PASSWORD Value:…}), YAML once its lines are
	// joined (- name: DB_PASSWORD value: …), CloudFormation
	// (ParameterKey: DbPassword ParameterValue: …).
	{regexp.MustCompile(`(?i)\b((?:name|key|parameterkey|optionname)["']?\s*[:=]\s*["']?(?:` + nameRE + `)["']?\s*[,;]?\s*["']?(?:value|val|parametervalue|optionvalue)["']?\s*[:=]\s*)(?:"(?:[^"\\]|\\.)*"|'[^']*'|[^\s"',;}\]]+)`), "${1}" + Mask},
	// Bearer <token>, Basic <creds>, anywhere
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+`), "${1} " + Mask},
	// name=value, name: value, name => value (Ruby) and name%3Dvalue
	// (form-encoded, percent-encoded again) for names that hold secrets:
	// a quoted value whole (spaces and all), a [list] or {map} whole,
	// else up to a space or a quote.
	{regexp.MustCompile(`(?i)\b(` + nameRE + `)` + sepRE + `(\\")(?:[^"\\]|\\[^"])*(\\")`), "${1}${2}${3}" + Mask + "${4}"},
	{regexp.MustCompile(`(?i)\b(` + nameRE + `)` + sepRE + `(?:"""[\s\S]*?"""|'''[\s\S]*?''')`), "${1}${2}" + Mask},
	{regexp.MustCompile(`(?i)\b(` + nameRE + `)` + sepRE + `[bBuU]?(")(?:[^"\\]|\\.)*(")`), "${1}${2}${3}" + Mask + "${4}"},
	{regexp.MustCompile(`(?i)\b(` + nameRE + `)` + sepRE + `[bBuU]?'(?:[^']|'')*'`), "${1}${2}'" + Mask + "'"},
	// --password value, --token=value in a command line (a process's
	// exec event, an audit log)
	{regexp.MustCompile(`(?i)((?:^|\s)--?(?:` + nameRE + `)(?:\s+|=))[^\s"'-][^\s"']*`), "${1}" + Mask},
	// Password=a b c; in a connection string: to the semicolon.
	{regexp.MustCompile(`(?i)\b((?:password|pwd)\s*=)[^;"'\n]*;`), "${1}" + Mask + ";"},
	// SQL: IDENTIFIED BY '…', [WITH] PASSWORD '…'; mysql -p…
	{regexp.MustCompile(`(?i)\b(identified\s+by|password)(\s+)'(?:[^']|'')*'`), "${1}${2}'" + Mask + "'"},
	{regexp.MustCompile(`(?i)(\bmysql(?:dump|admin)?\b[^\n]*?\s-p)(?:'[^']*'|"[^"]*"|[^\s'"]+)`), "${1}" + Mask},
	// The short password flags of other commands: sshpass -p, redis-cli
	// -a, ldapsearch (ldapmodify...) -w.
	// Quoted or not (sshpass -p 'pw').
	{regexp.MustCompile(`(?i)(\bsshpass\b[^\n]*?\s-p\s*)(?:'[^']*'|"[^"]*"|[^\s'"]+)`), "${1}" + Mask},
	{regexp.MustCompile(`(?i)(\bredis-cli\b[^\n]*?\s-a\s+)(?:'[^']*'|"[^"]*"|[^\s'"]+)`), "${1}" + Mask},
	{regexp.MustCompile(`(?i)(\bldap[a-z]*\b[^\n]*?\s-w\s*)(?:'[^']*'|"[^"]*"|[^\s'"]+)`), "${1}" + Mask},
	// .netrc: machine host login user password …
	{regexp.MustCompile(`(?i)(\b(?:machine\s+\S+|default)\s+(?:login\s+\S+\s+)?(?:account\s+\S+\s+)?password\s+)(?:"[^"]*"|'[^']*'|\S+)`), "${1}" + Mask},
	// aws configure set aws_secret_access_key …
	{regexp.MustCompile(`(?i)(\baws\s+configure\s+set\s+(?:` + nameRE + `)\s+)\S+`), "${1}" + Mask},
	{regexp.MustCompile(`(?i)\b(` + nameRE + `)` + sepRE + `(?:\[[^\]]*\]|\{[^}]*\})`), "${1}${2}" + Mask},
	{regexp.MustCompile(`(?i)\b(` + nameRE + `)` + sepRE + `[^\s"'\\<\[{]+`), "${1}${2}" + Mask},
	// e-mail addresses
	{regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`), Mask},
	// card-like numbers: 13 to 19 digits, optionally grouped by spaces or dashes
	// (not inside a token: xoxb-123456789012-…, whose detector needs it)
	{regexp.MustCompile(`(^|[^A-Za-z0-9_-])(?:\d[ -]?){12,18}\d\b`), "${1}" + Mask},
	// Oracle: user/password@host (EZConnect, sqlplus)
	{regexp.MustCompile(`(?i)((?:jdbc:oracle:[a-z]+:|\bsqlplus\s+)[^/\s@]+/)[^@\s]+@`), "${1}" + Mask + "@"},
}

// Before lines are joined, a line's end is known: an Authorization or a
// Cookie header on a line of its own (a header dump), and a secret's name
// with an unquoted value (YAML, .properties, env files: a passphrase of
// several words) are masked to the end of their line.
var (
	// pairLines: a name/value pair written on two lines (YAML: - name:
	// DB_PASSWORD, then value: …).
	pairLines  = regexp.MustCompile(`(?i)\b((?:name|key|parameterkey|optionname)["']?\s*[:=]\s*["']?(?:` + nameRE + `)["']?\s*[,;]?\s*["']?(?:value|val|parametervalue|optionvalue)["']?\s*[:=][ \t]*)(?:"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\n]+)`)
	authLine   = regexp.MustCompile(`(?im)^(\s*(?:proxy-)?authorization\s*:\s*)\S.*$`)
	cookieLine = regexp.MustCompile(`(?im)^(\s*(?:set-)?cookie\s*:\s*)\S.*$`)
	valueLine  = regexp.MustCompile(`(?im)^(\s*(?:export\s+)?(?:-\s+)?["']?(?:` + nameRE + `)["']?\s*[=:]\s*)[^"'\s\[{|>].*$`)
)

// secretName matches the names of fields and headers that hold secrets:
// any name with pass, secret, token, private, session, cred, auth,
// cookie, pwd, bearer, signature, hmac, sessid, access key or security code in
// it, any name that ends in key or keys (apiKey, privateKey,
// signing_keys), and pw, pin, sig, sid, otp, totp, hotp, ssn, cvv, cvc, iban
// and salt as a word of their own (alone, after a separator, or a
// capital: userPin, userPIN, PIN_CODE, otp_secret, cvv2).
var (
	secretName = regexp.MustCompile(`(?i)(?:` + secretStems + `|keys?$|(?:^|[_.-])(?:` + secretWords + `)(?:[_.-]?code)?(?:$|[_.-]))`)
	secretWord = regexp.MustCompile(`(?:^|[a-z0-9])(?:Pw|PW|Pin|PIN|Sig|SIG|Sid|SID|Otp|OTP|Totp|TOTP|Hotp|HOTP|Ssn|SSN|Cvv2?|CVV2?|Cvc2?|CVC2?|Iban|IBAN|Salt|SALT)(?:$|[A-Z0-9_.-])|^(?:pw|pin|sig|sid|otp|totp|hotp|ssn|cvv2?|cvc2?|iban|salt)[A-Z0-9]`)
)

// replaceNamed is re.ReplaceAllString(s, repl), but a match whose first
// group is a name notSecret knows stays as it is (partitionKey=…,
// bypass_cache=…).
func replaceNamed(re *regexp.Regexp, s, repl string) string {
	if re.NumSubexp() == 0 {
		return re.ReplaceAllString(s, repl)
	}
	var b []byte
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		b = append(b, s[last:m[0]]...)
		if m[2] >= 0 && benign(lastName(s[m[2]:m[3]])) {
			b = append(b, s[m[0]:m[1]]...)
		} else {
			b = re.ExpandString(b, repl, s, m)
		}
		last = m[1]
	}
	if last == 0 {
		return s
	}
	return string(append(b, s[last:]...))
}

// lastName is the name a group ends with: the word before its separator
// (`  - "partitionKey": ` is partitionKey).
func lastName(g string) string {
	g = strings.TrimRight(g, " \t\"'=:>")
	g = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(g, "%3D"), "%3d"), "%3A")
	if i := strings.LastIndexAny(g, " \t\"'<{,;(-"); i >= 0 && i < len(g)-1 {
		g = g[i+1:]
	}
	return g
}

// notSecret are the parts of names that the rules above would take for
// secrets and that hold none: keys that address data (partitionKey,
// routingKey, an S3 objectKey...), and words with pass, auth or cred in
// them (passengers, bypass, authors, credits). They are taken out of a
// name before it is judged, so that what else it says still counts
// (creditCardCvv, author_token are secrets).
var notSecret = regexp.MustCompile(`(?i)(?:partition|routing|sort|foreign|idempotency|message|cache|object|record|lookup|group|dedup|shard|hash|row|range|event|correlation)[_.-]?keys?$|passengers?|bypass|compass|authors?(?:$|[_.-]|id|name)|credit(?:s|or)?`)

// benign says a name the patterns took for a secret's holds none.
func benign(name string) bool { return notSecret.MatchString(name) && !SecretName(name) }

// MaxName is the longest name SecretName reads: longer text is not a
// field's or a header's name (and reading it cost a microsecond a byte,
// for every value a structure asks about: seventh pentest).
const MaxName = 256

// SecretName says whether a field or header called name holds a secret:
// what shows it masks its whole value. Text longer than MaxName is no
// name: false.
func SecretName(name string) bool {
	if len(name) > MaxName {
		return false
	}
	name = notSecret.ReplaceAllString(name, "")
	return name != "" && (secretName.MatchString(name) || secretWord.MatchString(name))
}

// SecretKey says whether the value under key (a map's key, a header's)
// is to be masked: a secret's name, or a key longer than MaxName, which
// no name is (masked unread, failing closed).
func SecretKey(key string) bool { return len(key) > MaxName || SecretName(key) }

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
	msg = replaceNamed(pairLines, msg, "${1}"+Mask)
	for _, re := range []*regexp.Regexp{authLine, cookieLine, valueLine} {
		msg = replaceNamed(re, msg, "${1}"+Mask)
	}
	msg = strings.Join(strings.Fields(msg), " ") // no newlines, no stack traces
	for _, b := range builtin {
		msg = replaceNamed(b.re, msg, b.repl)
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
