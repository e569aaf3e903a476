package config

import (
	"errors"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"relay/internal/secret"
)

// Console is the configuration of `relay console`.
type Console struct {
	Addr  string
	Token *secret.Value // nil: no token sign-in
	// UserHeader names the header a trusted proxy sets to the signed-in
	// user; it is believed only from TrustedProxies.
	UserHeader     string
	TrustedProxies []netip.Prefix
	AuditFile      string
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
	c.Console.Token = p.secret(EnvConsoleToken)
	c.Console.UserHeader = p.raw(EnvConsoleUserHeader)
	c.Console.AuditFile = p.raw(EnvConsoleAuditMetrics)
	for _, s := range p.list(EnvConsoleTrustedProxy) {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			a, err2 := netip.ParseAddr(s)
			if err2 != nil {
				p.fail(EnvConsoleTrustedProxy, "%q is neither an address nor a CIDR range", s)
				continue
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		// An IPv4 range written IPv6-mapped (::ffff:10.0.0.0/104) is the
		// IPv4 range: peers are compared unmapped.
		if pfx.Addr().Is4In6() && pfx.Bits() >= 96 {
			pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
		}
		c.Console.TrustedProxies = append(c.Console.TrustedProxies, pfx.Masked())
	}
	if (c.Console.UserHeader == "") != (len(c.Console.TrustedProxies) == 0) {
		p.fail(EnvConsoleUserHeader, "set together with %s, or neither: a user header believed from anywhere would let anyone act as anyone", EnvConsoleTrustedProxy)
	}
	// The minimum holds for a token from a file too, at every reload: a
	// rotated token too short is refused and the one in use stays.
	if err := c.Console.Token.Require(longEnough); err != nil {
		p.fail(c.Console.Token.VarName(EnvConsoleToken), "%v", err)
	}
}

// longEnough is the console token's minimum.
func longEnough(s string) error {
	if len(s) < 16 {
		return errors.New("shorter than 16 characters: too easy to guess")
	}
	return nil
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
