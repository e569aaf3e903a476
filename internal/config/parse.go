package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"relay/internal/secret"
)

type parser struct {
	lookup func(string) (string, bool)
	errs   []error
	seen   map[string]string // effective text of each variable read
	set    map[string]bool   // the variables read that the environment sets
}

func (p *parser) fail(name, format string, args ...any) {
	p.errs = append(p.errs, &Error{Var: name, Problem: fmt.Sprintf(format, args...)})
}

// raw returns the variable's value, or its documented default when unset.
// A variable set to the empty string counts as set: RELAY_HTTP_ADDR= turns
// the endpoint off.
func (p *parser) raw(name string) string {
	if v, ok := p.lookup(name); ok {
		p.seen[name], p.set[name] = strings.TrimSpace(v), true
		return strings.TrimSpace(v)
	}
	for _, v := range Vars {
		if v.Name == name {
			if v.Required {
				p.fail(name, "required but not set")
			}
			p.seen[name] = v.Default
			return v.Default
		}
	}
	return ""
}

// secret reads a secret variable, or the file its _FILE form names; nil
// when neither is set. Setting both, or naming a file that cannot be read,
// is an error.
func (p *parser) secret(name string) *secret.Value {
	v, ok, err := secret.Lookup(p.lookup, name)
	switch {
	case err != nil:
		p.varError(err)
		return nil
	case !ok:
		p.seen[name] = ""
		return nil
	case v.File != "":
		p.seen[name+secret.FileSuffix] = v.File
		return v
	}
	p.seen[name], p.set[name] = v.Get(), true
	return v
}

// clientCredentials reads the registry's OAuth settings: all three of the
// token endpoint, client id and secret, or none; never with basic auth.
func (p *parser) clientCredentials(c *Config) *secret.ClientCredentials {
	u, id, scope := p.raw(EnvRegistryTokenURL), p.raw(EnvRegistryClientID), p.raw(EnvRegistryScope)
	sec := p.secret(EnvRegistryClientSecret)
	if u == "" && id == "" && sec == nil {
		return nil
	}
	switch {
	case u == "" || id == "" || sec == nil:
		p.fail(EnvRegistryTokenURL, "%s, %s and %s go together: set all three or none", EnvRegistryTokenURL, EnvRegistryClientID, EnvRegistryClientSecret)
		return nil
	case c.SchemaRegistryUser != "" || c.SchemaRegistrySecret != nil:
		p.fail(EnvRegistryTokenURL, "set together with %s/%s: relay authenticates to the registry one way", EnvSchemaRegistryUser, EnvSchemaRegistrySecret)
		return nil
	}
	if pu, err := url.Parse(u); err != nil || (pu.Scheme != "https" && pu.Scheme != "http") || pu.Host == "" {
		p.fail(EnvRegistryTokenURL, "%q is not an http(s) URL", secret.MaskURL(u))
		return nil
	}
	return &secret.ClientCredentials{TokenURL: u, ClientID: id, Secret: sec, Scope: scope}
}

// tlsFiles reads the variables naming a TLS client's PEM files and checks
// that they load.
func (p *parser) tlsFiles(ca, cert, key string) secret.TLSFiles {
	f := secret.TLSFiles{CA: p.raw(ca), Cert: p.raw(cert), Key: p.raw(key), CAVar: ca, CertVar: cert, KeyVar: key}
	if _, err := f.Config(); err != nil {
		p.varError(err)
	}
	return f
}

// varError records a *secret.VarError as the *Error it is.
func (p *parser) varError(err error) {
	var ve *secret.VarError
	if errors.As(err, &ve) {
		p.fail(ve.Var, "%s", ve.Problem)
		return
	}
	p.errs = append(p.errs, err)
}

func (p *parser) list(name string) []string {
	var out []string
	for _, s := range strings.Split(p.raw(name), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (p *parser) duration(name string) time.Duration {
	s := p.raw(name)
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		p.fail(name, "%q is not a duration (examples: 100ms, 2s, 1m)", s)
	case d <= 0:
		p.fail(name, "%q must be positive", s)
	}
	return d
}

func (p *parser) intRange(name string, lo, hi int) int {
	s := p.raw(name)
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		p.fail(name, "%q is not a whole number from %d to %d", s, lo, hi)
	}
	return n
}

// tiers reads a list of tier delays; empty means no tiers.
func (p *parser) tiers(name string) []Tier {
	var out []Tier
	for _, s := range p.list(name) {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			p.fail(name, "%q is not a duration (example: 30s,5m)", s)
		case d < time.Second:
			p.fail(name, "tier delay %q is under 1s: use the blocking retry for that", s)
		case len(out) > 0 && d < out[len(out)-1].Delay:
			p.fail(name, "tier delays must not decrease: %s after %s", s, out[len(out)-1].Label)
		}
		out = append(out, Tier{Delay: d, Label: s})
	}
	if len(out) > 10 {
		p.fail(name, "%d tiers; at most 10", len(out))
	}
	return out
}

func (p *parser) regexp(name string) *regexp.Regexp {
	s := p.raw(name)
	if s == "" {
		return nil
	}
	re, err := regexp.Compile(s)
	if err != nil {
		p.fail(name, "not a valid RE2 regular expression: %v", err)
	}
	return re
}

func (p *parser) enum(name string, allowed ...string) string {
	s := strings.ToLower(p.raw(name))
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	p.fail(name, "%q is not one of %s", s, strings.Join(allowed, ", "))
	return allowed[0]
}

func (p *parser) level(name string) slog.Level {
	var l slog.Level
	s := p.enum(name, "debug", "info", "warn", "error")
	_ = l.UnmarshalText([]byte(s)) // s is one of the four names slog knows
	return l
}

// kafka collects RELAY_KAFKA_* into librdkafka properties.
func (p *parser) kafka(environ []string) (props, vars map[string]string, secrets map[string]*secret.Value) {
	props, vars, secrets = map[string]string{}, map[string]string{}, map[string]*secret.Value{}
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, KafkaPrefix) || len(name) == len(KafkaPrefix) {
			continue
		}
		base, fromFile := strings.CutSuffix(name, secret.FileSuffix)
		prop := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(base, KafkaPrefix), "_", "."))
		if why, managed := managedProps[prop]; managed {
			p.fail(name, "%s is managed by relay: %s", prop, why)
			continue
		}
		if instead, java := javaProps[prop]; java {
			p.fail(name, "%s is a property of Kafka's Java client, which librdkafka does not have: %s", prop, instead)
			continue
		}
		if fromFile {
			if !fileProp(prop) {
				p.fail(name, "only secret properties (passwords, keys, tokens) and sasl.username have a %s form; %s is not one", secret.FileSuffix, prop)
				continue
			}
			v, _, err := secret.Lookup(p.lookup, base)
			if err != nil {
				p.varError(err)
				continue
			}
			if v == nil { // environ and lookup disagree: nothing to read
				continue
			}
			props[prop], vars[prop], secrets[prop] = v.Get(), name, v
			p.seen[name] = v.File
			continue
		}
		if _, both := p.lookup(name + secret.FileSuffix); both && fileProp(prop) {
			continue // reported once, by the _FILE form
		}
		props[prop], vars[prop] = strings.TrimSpace(val), name
	}
	if _, ok := props["auto.offset.reset"]; !ok {
		props["auto.offset.reset"] = defaultOf(EnvAutoOffsetReset)
	}
	if _, ok := props["topic.metadata.refresh.interval.ms"]; !ok {
		props["topic.metadata.refresh.interval.ms"] = defaultOf(EnvMetadataRefresh)
	}
	if strings.TrimSpace(props["bootstrap.servers"]) == "" {
		p.fail(EnvBootstrapServers, "required but not set")
	}
	return props, vars, secrets
}

func (p *parser) kafkaMillis(c *Config, prop string, def time.Duration) time.Duration {
	s, ok := c.Kafka[prop]
	if !ok {
		return def
	}
	ms, err := strconv.Atoi(s)
	if err != nil || ms <= 0 {
		p.fail(c.VarForProperty(prop), "%q is not a positive number of milliseconds", s)
		return def
	}
	return time.Duration(ms) * time.Millisecond
}
