package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Provider is relay's tracer provider, or none (tracing off).
type Provider struct {
	sdk   *sdktrace.TracerProvider
	drops *drops
	prop  *Propagation
}

// ErrConfig marks a bad OTEL_* value: nothing was started.
var ErrConfig = errors.New("OpenTelemetry configuration")

// New builds the provider the OTEL_* variables of environ ask for. A
// Provider without tracing (no endpoint, OTEL_SDK_DISABLED=true,
// OTEL_TRACES_EXPORTER=none) is not an error. instance names this
// instance (service.instance.id) unless OTEL_RESOURCE_ATTRIBUTES does. An
// error wraps ErrConfig and names the variable.
func New(ctx context.Context, environ []string, instance string) (*Provider, error) {
	env := ParseEnv(environ)
	errs := env.check()
	disabled, err := env.Disabled()
	errs = append(errs, err)
	on, err := env.exporting()
	errs = append(errs, err)
	proto, err := env.Protocol(EnvTracesProtocol)
	errs = append(errs, err)
	prop, err := env.Propagation()
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if disabled || !on {
		return &Provider{prop: prop}, nil
	}
	res, err := newResource(ctx, instance)
	if err != nil {
		return nil, err
	}
	// OpenTelemetry's own selection (autoexport) builds the exporter
	// OTEL_TRACES_EXPORTER names (otlp by default, over the protocol
	// checked above; console), from the process's environment, as every
	// OTel SDK does; relay has checked the values first so that a bad one
	// names its variable. The OTLP exporters connect lazily: an absent
	// collector does not hold the start.
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q (%s %q): %w", ErrConfig, EnvTracesExporter, env[EnvTracesExporter], EnvTracesProtocol, proto, err)
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return &Provider{prop: prop}, nil
	}
	// The sampler (OTEL_TRACES_SAMPLER, _ARG) and the batch processor's
	// bounds (OTEL_BSP_*) are the SDK's to read.
	d := &drops{limit: env.queueLimit()}
	bsp := sdktrace.NewBatchSpanProcessor(countingExporter{exp, d})
	return &Provider{sdk: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(countingProcessor{bsp, d}), sdktrace.WithResource(res)),
		drops: d, prop: prop}, nil
}

// newResource is service.name relay and service.instance.id instance,
// overridden by OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func newResource(ctx context.Context, instance string) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{attribute.String("service.name", DefaultServiceName)}
	if instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", instance))
	}
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("%w: %s or %s: %w", ErrConfig, EnvResourceAttrs, EnvServiceName, err)
	}
	return res, nil
}

// NewWith is a provider exporting through sp (tests: an in-memory
// exporter behind a synchronous processor).
func NewWith(sp sdktrace.SpanProcessor, opts ...sdktrace.TracerProviderOption) *Provider {
	return &Provider{sdk: sdktrace.NewTracerProvider(append(opts, sdktrace.WithSpanProcessor(sp))...)}
}

// Propagation is what OTEL_PROPAGATORS asks for (W3C when p is nil, and
// for providers made by NewWith).
func (p *Provider) Propagation() *Propagation {
	if p == nil || p.prop == nil {
		return W3C
	}
	return p.prop
}

// Enabled says whether spans are made.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// TracerProvider is the provider, nil when tracing is off.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if !p.Enabled() {
		return nil
	}
	return p.sdk
}

// Tracer is relay's tracer of package name, nil when tracing is off:
// callers skip every span then.
func (p *Provider) Tracer(name string) trace.Tracer {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.Tracer(name)
}

// Shutdown exports the spans still queued and stops the exporter, within
// ctx's deadline: what is not out by then is dropped.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// LogErrors sends OpenTelemetry's own errors (an unreachable collector, a
// full queue) to log as warnings, at most one a minute: the SDK would
// otherwise print each to stderr unstructured.
func LogErrors(log *slog.Logger) {
	var last atomic.Int64
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		now := time.Now().UnixNano()
		if prev := last.Load(); now-prev < int64(time.Minute) || !last.CompareAndSwap(prev, now) {
			return
		}
		log.Warn("OpenTelemetry export failed; spans and metrics are dropped while it lasts (shown once a minute)", "err", err)
	}))
}
