package tracing

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The standard variables relay reads itself; the exporters and the SDK
// read the others (headers, timeouts, OTEL_BSP_*, the sampler) from the
// process environment.
const (
	EnvSDKDisabled      = "OTEL_SDK_DISABLED"
	EnvTracesExporter   = "OTEL_TRACES_EXPORTER"
	EnvEndpoint         = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint   = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol         = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol   = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvHeaders          = "OTEL_EXPORTER_OTLP_HEADERS"
	EnvTracesHeaders    = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	EnvSampler          = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg       = "OTEL_TRACES_SAMPLER_ARG"
	EnvServiceName      = "OTEL_SERVICE_NAME"
	EnvResourceAttrs    = "OTEL_RESOURCE_ATTRIBUTES"
	ProtocolGRPC        = "grpc"
	ProtocolHTTP        = "http/protobuf"
	DefaultServiceName  = "relay"
	protocolHTTPJSON    = "http/json"
	exporterNone        = "none"
	exporterOTLP        = "otlp"
	exporterConsole     = "console"
	samplerParentRatio  = "parentbased_traceidratio"
	samplerTraceIDRatio = "traceidratio"
)

// bspInts are the batch span processor's variables: non-negative integers
// (milliseconds or counts), read by the SDK, which ignores a bad one; relay
// refuses it instead.
var bspInts = []string{"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"}

// samplers are the values of OTEL_TRACES_SAMPLER the Go SDK knows.
var samplers = []string{"always_on", "always_off", samplerTraceIDRatio, "parentbased_always_on", "parentbased_always_off", samplerParentRatio}

// Env is the OTEL_* variables of an environment.
type Env map[string]string

// ParseEnv keeps the OTEL_* variables of environ (KEY=value lines).
func ParseEnv(environ []string) Env {
	env := Env{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "OTEL_") {
			env[k] = strings.TrimSpace(v)
		}
	}
	return env
}

// first is the value of the first of names that is set.
func (e Env) first(names ...string) (name, value string) {
	for _, n := range names {
		if v := e[n]; v != "" {
			return n, v
		}
	}
	return names[0], ""
}

// Protocol is the OTLP protocol signal's variables ask for (http/protobuf
// when none does): the signal's own variable first, then the general one.
// http/json (which the Go exporters do not speak) and unknown values are
// errors naming the variable.
func (e Env) Protocol(signalVar string) (string, error) {
	name, proto := e.first(signalVar, EnvProtocol)
	switch proto {
	case "", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	case protocolHTTPJSON:
		return "", fmt.Errorf("%s %q: relay exports OTLP over %s or %s", name, proto, ProtocolHTTP, ProtocolGRPC)
	default:
		return "", fmt.Errorf("%s %q: unknown protocol (%s or %s)", name, proto, ProtocolHTTP, ProtocolGRPC)
	}
}

// Disabled reads OTEL_SDK_DISABLED (true or false).
func (e Env) Disabled() (bool, error) {
	switch v := strings.ToLower(e[EnvSDKDisabled]); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, fmt.Errorf("%s %q: true or false", EnvSDKDisabled, e[EnvSDKDisabled])
	}
}

// exporting says whether traces are exported: OTEL_TRACES_EXPORTER otlp
// or console, or unset with an endpoint; none (or unset without an
// endpoint) turns it off. One exporter: OpenTelemetry's selection reads
// the value as one name.
func (e Env) exporting() (bool, error) {
	_, endpoint := e.first(EnvTracesEndpoint, EnvEndpoint)
	ex, err := e.Exporter(EnvTracesExporter, exporterOTLP, exporterConsole, exporterNone)
	if err != nil || ex == "" {
		return endpoint != "", err
	}
	return ex != exporterNone, nil
}

// Exporter is the exporter the variable name selects, "" when unset:
// one of names, or an error naming the variable.
func (e Env) Exporter(name string, names ...string) (string, error) {
	v := e[name]
	if v == "" || slices.Contains(names, v) {
		return v, nil
	}
	if strings.Contains(v, ",") {
		return "", fmt.Errorf("%s %q: one exporter, not a list (%s)", name, v, strings.Join(names, ", "))
	}
	return "", fmt.Errorf("%s %q: relay exports with %s", name, v, strings.Join(names, ", "))
}

// check refuses the values of the variables the SDK and the exporters
// would otherwise ignore with a log line.
func (e Env) check() []error {
	var errs []error
	for _, n := range []string{EnvTracesEndpoint, EnvEndpoint} {
		if v := e[n]; v != "" {
			if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("%s %q: not an http:// or https:// URL", n, v))
			}
		}
	}
	for _, n := range []string{EnvHeaders, EnvTracesHeaders} {
		for _, h := range strings.Split(e[n], ",") {
			if k, _, ok := strings.Cut(h, "="); strings.TrimSpace(h) != "" && (!ok || strings.TrimSpace(k) == "") {
				errs = append(errs, fmt.Errorf("%s: %q is not key=value", n, h))
			}
		}
	}
	for _, n := range bspInts {
		if v := e[n]; v != "" {
			if i, err := strconv.Atoi(v); err != nil || i < 0 {
				errs = append(errs, fmt.Errorf("%s %q: a whole number, 0 or more", n, v))
			}
		}
	}
	return append(errs, e.checkSampler()...)
}

// checkSampler refuses a sampler the SDK does not know, and a ratio that
// is not one.
func (e Env) checkSampler() []error {
	s := strings.ToLower(e[EnvSampler])
	if s == "" {
		return nil
	}
	found := false
	for _, k := range samplers {
		found = found || s == k
	}
	if !found {
		return []error{fmt.Errorf("%s %q: one of %s", EnvSampler, e[EnvSampler], strings.Join(samplers, ", "))}
	}
	if arg := e[EnvSamplerArg]; arg != "" && (s == samplerTraceIDRatio || s == samplerParentRatio) {
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			return []error{fmt.Errorf("%s %q: a ratio from 0 to 1", EnvSamplerArg, arg)}
		}
	}
	return nil
}
