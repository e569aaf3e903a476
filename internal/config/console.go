package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"relay/internal/secret"
)

// Console is the configuration of `relay console`.
type Console struct {
	Addr string
	// MetricsAddr, when set, is a second listener with /healthz and
	// /metrics only.
	MetricsAddr string
	Token       *secret.Value // nil: no token sign-in
	// UserHeader names the header a trusted proxy sets to the signed-in
	// user; it is believed only from TrustedProxies.
	UserHeader     string
	TrustedProxies []netip.Prefix
	// ProxySocket is a Unix socket the console also listens on, for the
	// authenticating proxy of its pod: UserHeader is believed there.
	ProxySocket string
	// ForwardedBy are proxies believed for X-Forwarded-For and
	// X-Forwarded-Proto only.
	ForwardedBy []netip.Prefix
	// TrustUnsigned believes UserHeader from a range of more than one
	// address (RELAY_CONSOLE_TRUST_UNSIGNED_HEADER).
	TrustUnsigned bool
	// Insecure lets the console beyond loopback take the token over
	// plain HTTP, and open reads without AllowedHosts.
	Insecure bool
	// ReadAuth is RELAY_CONSOLE_READ_AUTH: "open", "signed-in", or ""
	// (open on loopback only, signed-in elsewhere: see ReadsSignedIn).
	ReadAuth string
	// AllowedHosts are the Host names the console answers to; empty: any
	// (beyond loopback only: on loopback, loopback's names).
	AllowedHosts []string
	AuditFile    string
}

// ReadsSignedIn says whether reading needs a signed-in operator, for a
// console that listens on loopback only (loopback) or not.
func (c *Console) ReadsSignedIn(loopback bool) bool {
	return c.ReadAuth == "signed-in" || (c.ReadAuth == "" && !loopback)
}

// OnLoopback says whether addr (host:port) listens on loopback only.
func OnLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Owner is who owns the quarantine of source topic src; "" when nobody
// was named.
func (c *Config) Owner(src string) string {
	if o, ok := c.Owners[src]; ok {
		return o
	}
	return c.Owners[""]
}

// Threshold is the alert threshold of src's quarantine; 0 when none.
func (c *Config) Threshold(src string) int {
	if n, ok := c.Thresholds[src]; ok {
		return n
	}
	return c.Thresholds[""]
}

// readConsole reads the console's variables, the quarantine's ownership
// and what a replay watches.
func (p *parser) readConsole(c *Config) {
	c.Owners = map[string]string{}
	for k, v := range p.perSource(EnvQuarantineOwner, c.SourceTopics) {
		if strings.ContainsAny(v, "\"\\\n") {
			p.fail(EnvQuarantineOwner, "owner %q: quotes, backslashes and line breaks are not allowed", v)
		}
		c.Owners[k] = v
	}
	c.Thresholds = map[string]int{}
	for k, v := range p.perSource(EnvQuarantineThreshold, c.SourceTopics) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			p.fail(EnvQuarantineThreshold, "%q is not a whole number from 1", v)
		}
		c.Thresholds[k] = n
	}
	for _, u := range p.list(EnvReplayWatchMetrics) {
		if x, err := url.Parse(u); err != nil || (x.Scheme != "http" && x.Scheme != "https") || x.Host == "" {
			p.fail(EnvReplayWatchMetrics, "%q is not an http(s) URL", secret.MaskURL(u))
		}
		c.WatchMetrics = append(c.WatchMetrics, u)
	}
	c.Console.Addr = p.raw(EnvConsoleAddr)
	if m := p.raw(EnvConsoleMetricsAddr); m != "" {
		if _, _, err := net.SplitHostPort(m); err != nil {
			p.fail(EnvConsoleMetricsAddr, "%q is not host:port: %v", m, err)
		} else if m == c.Console.Addr {
			p.fail(EnvConsoleMetricsAddr, "%q is %s itself: name another port, or leave it unset", m, EnvConsoleAddr)
		}
		c.Console.MetricsAddr = m
	}
	c.Console.Token = p.secret(EnvConsoleToken)
	c.Console.UserHeader = p.raw(EnvConsoleUserHeader)
	c.Console.AuditFile = p.raw(EnvConsoleAuditMetrics)
	c.Console.TrustedProxies = p.prefixes(EnvConsoleTrustedProxy)
	c.Console.ProxySocket = p.raw(EnvConsoleProxySocket)
	c.Console.ForwardedBy = p.prefixes(EnvConsoleForwardedBy)
	for _, pfx := range c.Console.ForwardedBy {
		if (pfx.Addr().Is4() && pfx.Bits() < 16) || (pfx.Addr().Is6() && pfx.Bits() < 48) {
			p.fail(EnvConsoleForwardedBy, "%s is wider than a pod network (/16, or /48 for IPv6): any client in it could pick how it is counted; name the ingress controller's pods", pfx)
		}
	}
	if c.Console.UserHeader != "" && len(c.Console.TrustedProxies) == 0 && c.Console.ProxySocket == "" {
		p.fail(EnvConsoleUserHeader, "set without %s or %s: a user header believed from anywhere would let anyone act as anyone", EnvConsoleTrustedProxy, EnvConsoleProxySocket)
	}
	if c.Console.ProxySocket != "" && c.Console.UserHeader == "" {
		p.fail(EnvConsoleProxySocket, "set without %s: the proxy on the socket must name the user", EnvConsoleUserHeader)
	}
	c.Console.TrustUnsigned = p.enum(EnvConsoleTrustUnsigned, "false", "true") == "true"
	c.Console.Insecure = p.enum(EnvConsoleInsecure, "false", "true") == "true"
	for _, pfx := range c.Console.TrustedProxies {
		switch {
		case c.Console.UserHeader == "":
		case pfx.Contains(netip.MustParseAddr("127.0.0.1")) || pfx.Contains(netip.IPv6Loopback()) || pfx.Addr().IsLoopback():
			// Whatever TRUST_UNSIGNED says: a loopback address is no
			// proxy's own. kubectl port-forward delivers from it, and so
			// does any process on the host or in the pod.
			p.fail(EnvConsoleTrustedProxy, "%s is a loopback address: kubectl port-forward and any process on this host or in this pod arrive from it, and could set %s and act as anyone. Put the authenticating proxy on %s (a Unix socket in the pod, as the chart's oauth2-proxy sidecar does)",
				pfx, c.Console.UserHeader, EnvConsoleProxySocket)
		case pfx.Bits() < pfx.Addr().BitLen() && !c.Console.TrustUnsigned:
			p.fail(EnvConsoleTrustedProxy, "%s is a range: any pod in it could set %s and act as anyone. Put the authenticating proxy on %s, trust the one address of a proxy outside the pod, or set %s=true to accept that",
				pfx, c.Console.UserHeader, EnvConsoleProxySocket, EnvConsoleTrustUnsigned)
		}
	}
	switch v := p.raw(EnvConsoleReadAuth); v {
	case "", "open", "signed-in":
		c.Console.ReadAuth = v
	default:
		p.fail(EnvConsoleReadAuth, "%q is not open or signed-in", v)
	}
	for _, h := range p.list(EnvConsoleAllowedHosts) {
		if strings.ContainsAny(h, ":/ ") {
			p.fail(EnvConsoleAllowedHosts, "%q is not a host name (no port, no scheme)", h)
		}
		c.Console.AllowedHosts = append(c.Console.AllowedHosts, strings.ToLower(h))
	}
	// The minimum holds for a token from a file too, at every reload: a
	// rotated token too short is refused and the one in use stays.
	if err := c.Console.Token.Require(longEnough); err != nil {
		p.fail(c.Console.Token.VarName(EnvConsoleToken), "%v", err)
	}
}

// prefixes reads a list of addresses or CIDR ranges.
func (p *parser) prefixes(name string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range p.list(name) {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			a, err2 := netip.ParseAddr(s)
			if err2 != nil {
				p.fail(name, "%q is neither an address nor a CIDR range", s)
				continue
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		// An IPv4 range written IPv6-mapped (::ffff:10.0.0.0/104) is the
		// IPv4 range: peers are compared unmapped.
		if pfx.Addr().Is4In6() && pfx.Bits() >= 96 {
			pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
		}
		out = append(out, pfx.Masked())
	}
	return out
}

// longEnough is the console token's minimum: 16 characters, no word or
// pattern repeated to length (passwordpassword), no run of consecutive
// characters for half its length (0123456789abcdef), and enough variety
// in its characters (their Shannon entropy times its length at least
// minTokenBits: aaaaaaaabbbbbbbb has 16). An estimate from the token
// alone: it refuses the tokens people type, and one random 16-digit hex
// token in about 3,000 (make another; a longer one is never refused).
func longEnough(s string) error {
	switch {
	case len(s) < 16:
		return errors.New("shorter than 16 characters: too easy to guess")
	case periodic(s):
		return errors.New("a shorter string repeated: too easy to guess; make one with openssl rand -hex 16")
	case commonWords(s)*2 >= len(s):
		return errors.New("made of common words or keyboard walks (password, admin, token, qwerty...) for half its length: too easy to guess; make one with openssl rand -hex 16")
	case runLength(s) >= len(s)/2:
		return errors.New("a run of consecutive characters for half its length: too easy to guess; make one with openssl rand -hex 16")
	}
	if bits := entropyBits(s); bits < minTokenBits {
		return fmt.Errorf("too little variety in its characters (about %.0f bits, fewer than %d): too easy to guess; make one with openssl rand -hex 16", bits, minTokenBits)
	}
	return nil
}

// minTokenBits is the least entropyBits a console token has.
const minTokenBits = 38

// entropyBits estimates s's entropy: the Shannon entropy of its
// characters' frequencies, times its length.
func entropyBits(s string) float64 {
	n := 0
	count := map[rune]int{}
	for _, r := range s {
		count[r]++
		n++
	}
	var h float64
	for _, c := range count {
		p := float64(c) / float64(n)
		h -= p * math.Log2(p)
	}
	return h * float64(n)
}

// periodic says whether s is, near enough, a shorter string repeated: at
// some shift, three characters in four equal the one that far before
// (passwordpassword!, adminadminadmin1).
func periodic(s string) bool {
	for p := 1; p <= len(s)/2; p++ {
		same := 0
		for i := p; i < len(s); i++ {
			if s[i] == s[i-p] {
				same++
			}
		}
		if same*4 >= (len(s)-p)*3 {
			return true
		}
	}
	return false
}

// weakWords are words and keyboard walks that people put in tokens.
var weakWords = []string{"password", "passwd", "pass", "secret", "token", "console", "admin", "welcome", "changeme", "letmein",
	"default", "master", "login", "relay", "kafka", "test", "qwerty", "uiop", "asdf", "ghjk", "zxcv", "1qaz", "2wsx", "3edc",
	"4rfv", "5tgb", "iloveyou", "monkey", "dragon", "super"}

// commonWords is how many of s's characters are in weakWords, once
// lowercased and its digits and symbols read as the letters they stand
// for (P@ssw0rd is password).
func commonWords(s string) int {
	plain := strings.NewReplacer("@", "a", "4", "a", "3", "e", "0", "o", "$", "s", "5", "s", "7", "t", "!", "i").Replace(strings.ToLower(s))
	covered := make([]bool, len(plain))
	for _, w := range weakWords {
		for from := 0; ; {
			i := strings.Index(plain[from:], w)
			if i < 0 {
				break
			}
			for k := from + i; k < from+i+len(w); k++ {
				covered[k] = true
			}
			from += i + 1
		}
	}
	n := 0
	for _, c := range covered {
		if c {
			n++
		}
	}
	return n
}

// runLength is the longest run of s's bytes each one above or below the
// one before it.
func runLength(s string) int {
	best, run, step := 1, 1, 0
	for i := 1; i < len(s); i++ {
		d := int(s[i]) - int(s[i-1])
		switch {
		case (d == 1 || d == -1) && d == step:
			run++
		case d == 1 || d == -1:
			run, step = 2, d
		default:
			run, step = 1, 0
		}
		best = max(best, run)
	}
	return best
}

// perSource reads "value" (every source) or "topic=value,…" (one per
// source topic); a topic that is not a source is an error.
func (p *parser) perSource(name string, sources []string) map[string]string {
	out := map[string]string{}
	raw := p.raw(name)
	if raw == "" {
		return out
	}
	if !strings.Contains(raw, "=") {
		out[""] = raw
		return out
	}
	for _, part := range p.list(name) {
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case !ok || k == "" || v == "":
			p.fail(name, "%q is not topic=value", part)
		case !slices.Contains(sources, k):
			p.fail(name, "%q is not one of %s (%s)", k, EnvSourceTopics, strings.Join(sources, ","))
		default:
			out[k] = v
		}
	}
	return out
}
