package cli

import (
	"fmt"
	"io"

	"relay/internal/config"
	"relay/internal/kafkaclient"
	"relay/internal/secret"
	"relay/internal/tracing"
)

// A group of relay config's text: settings of one kind from one source.
type group struct {
	title    string
	settings []config.Setting
}

// ShowConfig prints what relay config prints: the effective settings,
// secrets masked. As text, NAME=value lines in groups under a "# "
// comment that says where they come from: relay's variables and the
// librdkafka properties passed through (the environment, a _FILE, relay's
// default, derived), the librdkafka properties relay sets on its consumers
// and producers unless RELAY_KAFKA_* does, and the OpenTelemetry
// variables. With -o json (or yaml), one object of names to values (relay's
// variables, the passthrough and the OTEL_* variables).
func ShowConfig(w io.Writer, out Output, cfg *config.Config, environ []string) {
	relay, otel := cfg.Settings(), otelSettings(environ)
	if out == JSON || out == YAML {
		m := map[string]string{}
		for _, s := range append(relay, otel...) {
			m[s.Name] = s.Value
		}
		_ = Write(w, out, m)
		return
	}
	var groups []group
	for _, src := range []string{config.SourceEnv, config.SourceFile, config.SourceDerived, config.SourceDefault, config.SourceUnset} {
		groups = append(groups, group{"RELAY_* and RELAY_KAFKA_*, " + sourceTitle[src], pick(relay, src)})
	}
	for _, kind := range []string{"consumer", "producer"} {
		var g []config.Setting
		for _, d := range kafkaclient.Defaults() {
			if _, set := cfg.Kafka[d.Property]; !set && d.Client == kind {
				g = append(g, config.Setting{Name: cfg.VarForProperty(d.Property), Value: d.Value, Source: config.SourceDefault})
			}
		}
		groups = append(groups, group{"librdkafka properties relay sets on its " + kind + "s unless RELAY_KAFKA_* does (bounded memory; docs/REFERENCE.md says why)", g})
	}
	for _, src := range []string{config.SourceEnv, config.SourceDerived, config.SourceDefault, config.SourceUnset} {
		groups = append(groups, group{"OTEL_*, " + sourceTitle[src], pick(otel, src)})
	}
	for _, g := range groups {
		if len(g.settings) == 0 {
			continue
		}
		fmt.Fprintf(w, "# %s\n", g.title)
		for _, s := range g.settings {
			fmt.Fprintf(w, "%s=%s\n", s.Name, s.Value)
		}
	}
}

var sourceTitle = map[string]string{
	config.SourceEnv:     "set in the environment",
	config.SourceFile:    "read from files (the path is shown)",
	config.SourceDerived: "derived from other settings",
	config.SourceDefault: "defaults",
	config.SourceUnset:   "not set",
}

func pick(settings []config.Setting, source string) []config.Setting {
	var out []config.Setting
	for _, s := range settings {
		if s.Source == source {
			out = append(out, s)
		}
	}
	return out
}

// otelSettings are the OTEL_* settings of environ, as config's.
func otelSettings(environ []string) []config.Setting {
	var out []config.Setting
	for _, s := range tracing.ParseEnv(environ).Settings(secret.MaskURL) {
		out = append(out, config.Setting(s))
	}
	return out
}
