package tracing

import (
	"sort"
	"strings"
)

// Setting is one OpenTelemetry setting and where its value comes from:
// one of the Source constants (relay config shows them).
type Setting struct{ Name, Value, Source string }

// Where a setting's value comes from.
const (
	SourceEnv     = "env"
	SourceDefault = "default"
	SourceDerived = "derived"
	SourceUnset   = "unset"
)

// The standard variables relay shows with their defaults, whether set or
// not: the ones an operator asks about first. Every other OTEL_* variable
// the environment sets is shown as set.
var otelDefaults = []struct{ name, value string }{
	{EnvSDKDisabled, "false"},
	{EnvServiceName, DefaultServiceName},
	{EnvResourceAttrs, ""},
	{EnvEndpoint, ""},
	{EnvProtocol, ProtocolHTTP},
	{EnvHeaders, ""},
	{EnvTracesExporter, ""},
	{"OTEL_METRICS_EXPORTER", ""},
	{EnvSampler, "parentbased_always_on"},
	{EnvPropagators, defaultPropagators},
	{"OTEL_BSP_SCHEDULE_DELAY", "5000"},
	{"OTEL_BSP_MAX_QUEUE_SIZE", "2048"},
	{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "512"},
	{"OTEL_BSP_EXPORT_TIMEOUT", "30000"},
	{"OTEL_METRIC_EXPORT_INTERVAL", "60000"},
}

// Settings are the OpenTelemetry settings of e, for relay config: the
// standard variables relay's SDK reads, at their value or default, and
// the other OTEL_* variables set. The exporters are shown as derived from
// the endpoint when unset; header values are masked (they carry
// credentials), and endpoints pass through maskURL (tracing imports
// nothing of relay's: the caller gives secret.MaskURL).
func (e Env) Settings(maskURL func(string) string) []Setting {
	var out []Setting
	shown := map[string]bool{}
	_, traces := e.first(EnvTracesEndpoint, EnvEndpoint)
	_, metrics := e.first("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", EnvEndpoint)
	for _, d := range otelDefaults {
		shown[d.name] = true
		s := Setting{Name: d.name, Value: d.value, Source: SourceDefault}
		switch v, set := e[d.name]; {
		case set:
			s.Value, s.Source = v, SourceEnv
		case d.name == EnvTracesExporter || d.name == "OTEL_METRICS_EXPORTER":
			// otlp when the signal has an endpoint (its own or the general one)
			s.Value, s.Source = exporterNone, SourceDerived
			if (d.name == EnvTracesExporter && traces != "") || (d.name != EnvTracesExporter && metrics != "") {
				s.Value = exporterOTLP
			}
		case d.value == "":
			s.Source = SourceUnset
		}
		out = append(out, s)
	}
	var rest []string
	for k := range e {
		if !shown[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		out = append(out, Setting{Name: k, Value: e[k], Source: SourceEnv})
	}
	for i := range out {
		switch {
		case strings.HasSuffix(out[i].Name, "_HEADERS"):
			out[i].Value = maskHeaders(out[i].Value)
		case strings.HasSuffix(out[i].Name, "_ENDPOINT") && out[i].Value != "":
			out[i].Value = maskURL(out[i].Value)
		}
	}
	return out
}

// maskHeaders is an OTEL_EXPORTER_OTLP_*HEADERS value with the values
// masked: key=****,….
func maskHeaders(v string) string {
	if v == "" {
		return v
	}
	parts := strings.Split(v, ",")
	for i, h := range parts {
		k, _, ok := strings.Cut(h, "=")
		if !ok {
			k = "****" // not key=value: it may be the credential alone
		}
		parts[i] = strings.TrimSpace(k) + "=****"
	}
	return strings.Join(parts, ",")
}
