package config

import (
	"net/netip"
	"net/url"
	"sort"
	"strings"

	"relay/internal/secret"
)

// InsecureURL is a URL relay sends a credential to over plain HTTP.
type InsecureURL struct{ Var, URL, What string }

// InsecureCredentialURLs lists the URLs relay would send a credential to
// over plain http:// to a host other than loopback: the hook's with a
// token, the registry's with a password or an OAuth token, the token
// endpoint's (the client secret).
func (c *Config) InsecureCredentialURLs() []InsecureURL {
	var out []InsecureURL
	check := func(name, u, what string, sends bool) {
		x, err := url.Parse(u)
		if !sends || err != nil || !strings.EqualFold(x.Scheme, "http") {
			return
		}
		if ip, err := netip.ParseAddr(x.Hostname()); (err == nil && ip.IsLoopback()) || strings.EqualFold(x.Hostname(), "localhost") {
			return
		}
		out = append(out, InsecureURL{name, u, what})
	}
	check(EnvHookURL, c.HookURL, "the hook's token ("+c.HookToken.VarName(EnvHookToken)+")", c.HookToken != nil)
	check(EnvSchemaRegistryURL, c.SchemaRegistryURL, "the registry's credentials", c.SchemaRegistrySecret != nil || c.SchemaRegistryOAuth != nil)
	if o := c.SchemaRegistryOAuth; o != nil {
		check(EnvRegistryTokenURL, o.TokenURL, "the client secret", true)
	}
	return out
}

// secretProp reports whether a librdkafka property holds a secret.
func secretProp(prop string) bool {
	for _, s := range []string{"password", "passphrase", "secret", "jaas", "token", "ssl.key", "oauthbearer.config", "credential", ".pem"} {
		if strings.Contains(prop, s) {
			return true
		}
	}
	return false
}

// fileProp reports whether a librdkafka property may come from a file
// (RELAY_KAFKA_<PROP>_FILE): the secrets, and the user names that rotate
// with them (a Confluent Cloud API key is the user name of its secret).
func fileProp(prop string) bool {
	return secretProp(prop) || prop == "sasl.username" || prop == "sasl.oauthbearer.client.id"
}

// secretVar reports whether name is one of relay's secret variables.
func secretVar(name string) bool {
	for _, v := range Vars {
		if v.Name == name {
			return v.Secret
		}
	}
	return false
}

// FileSecrets are the secrets read from files, which relay reads again
// when they change.
func (c *Config) FileSecrets() []*secret.Value {
	var out []*secret.Value
	vals := []*secret.Value{c.SchemaRegistrySecret, c.HookToken, c.HookSigningSecret, c.Console.Token}
	if c.SchemaRegistryOAuth != nil {
		vals = append(vals, c.SchemaRegistryOAuth.Secret)
	}
	for _, v := range vals {
		if v != nil && v.File != "" {
			out = append(out, v)
		}
	}
	props := make([]string, 0, len(c.KafkaSecrets))
	for p := range c.KafkaSecrets {
		props = append(props, p)
	}
	sort.Strings(props)
	for _, p := range props {
		out = append(out, c.KafkaSecrets[p])
	}
	return out
}
