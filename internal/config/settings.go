package config

import (
	"sort"
	"strconv"
	"strings"

	"relay/internal/secret"
)

// Where a setting's value comes from.
const (
	SourceEnv     = "env"     // the environment sets it
	SourceFile    = "file"    // its _FILE form names a file holding it (the path is shown)
	SourceDefault = "default" // relay's documented default
	SourceDerived = "derived" // relay computes it from other settings
	SourceUnset   = "unset"   // not set, and without a default
)

// Setting is one effective value, masked when it is a secret, and where it
// comes from.
type Setting struct {
	Name, Value, Source string
}

// Settings are the effective relay variables and then the librdkafka
// properties passed through (RELAY_KAFKA_*), secrets masked: a secret read
// from a file shows the file's path under its _FILE name.
func (c *Config) Settings() []Setting {
	var out []Setting
	for _, v := range Vars {
		if strings.HasPrefix(v.Name, KafkaPrefix) {
			continue
		}
		val, src := c.raw[v.Name], SourceUnset
		switch {
		case c.set[v.Name]:
			src = SourceEnv
		case val != "":
			src = SourceDefault
		}
		switch {
		case v.Name == EnvSchemaReaderVersion && val == "" && c.SchemaReaderVersion > 0:
			val, src = strconv.Itoa(c.SchemaReaderVersion), SourceDerived // from the accepted versions
		case v.Secret && c.raw[v.Name+secret.FileSuffix] != "":
			out = append(out, Setting{v.Name + secret.FileSuffix, c.raw[v.Name+secret.FileSuffix], SourceFile})
			continue
		case v.Secret && val != "":
			val = "****"
		case v.Name == EnvSchemaRegistryURL || v.Name == EnvHookURL || v.Name == EnvRegistryTokenURL:
			val = secret.MaskURL(val)
		}
		out = append(out, Setting{v.Name, val, src})
	}
	props := make([]string, 0, len(c.Kafka))
	for p := range c.Kafka {
		props = append(props, p)
	}
	sort.Strings(props)
	for _, p := range props {
		val, src := c.Kafka[p], SourceEnv
		switch s := c.KafkaSecrets[p]; {
		case s != nil:
			val, src = s.File, SourceFile
		case secretProp(p):
			val = "****"
		}
		if _, ok := c.kafkaVar[p]; !ok {
			src = SourceDefault // auto.offset.reset, topic.metadata.refresh.interval.ms
			if p == "transaction.timeout.ms" && c.txnTimeoutDerived {
				src = SourceDerived
			}
		}
		out = append(out, Setting{c.VarForProperty(p), val, src})
	}
	return out
}

// Effective is Settings as NAME=value lines.
func (c *Config) Effective() []string {
	s := c.Settings()
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = v.Name + "=" + v.Value
	}
	return out
}

// SASLCredentials are the SASL username and password the Kafka clients
// use now: each from its file when it has a _FILE form (read as it is
// now), else from RELAY_KAFKA_SASL_*. of says whether v is one of them:
// a change to another secret does not touch the SASL credentials.
func (c *Config) SASLCredentials(v *secret.Value) (user, pass string, of bool) {
	user, pass = c.Kafka["sasl.username"], c.Kafka["sasl.password"]
	if s := c.KafkaSecrets["sasl.username"]; s != nil {
		user = s.Get()
	}
	if s := c.KafkaSecrets["sasl.password"]; s != nil {
		pass = s.Get()
	}
	of = v != nil && (v == c.KafkaSecrets["sasl.password"] || v == c.KafkaSecrets["sasl.username"])
	return user, pass, of
}
