package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// MetricCredentialRefused is 1 while a dependency refuses relay's
// credential (the schema registry or the hook answered 401 or 403), by
// dependency.
const MetricCredentialRefused = "relay.dependency.credential.refused"

// Dependencies whose credential relay watches, as the label says them.
const (
	DependencyRegistry = "schema_registry"
	DependencyHook     = "hook"
)

// refusals is which dependencies refuse relay's credential now. A refusal
// is nobody's record's fault: records wait within their retry budget, and
// relay reports not ready until the dependency accepts the credential
// again.
type refusals struct {
	mu  sync.Mutex
	now map[string]string // dependency -> what to fix
}

// Access returns what a client of dependency reports each answer to:
// refused (401/403) or accepted (2xx). variables names what sets the
// credential, for the log line and /readyz. The first refusal and the
// first acceptance after it are logged, nothing in between.
func (m *Metrics) Access(dependency, variables string, log *slog.Logger) func(refused bool, status int) {
	m.refused.mu.Lock()
	if m.refused.now == nil {
		m.refused.now = map[string]string{}
	}
	m.refused.mu.Unlock()
	return func(refused bool, status int) {
		r := &m.refused
		r.mu.Lock()
		_, was := r.now[dependency]
		switch {
		case refused && !was:
			what := fmt.Sprintf("%d %s", status, http.StatusText(status))
			if status == 0 {
				what = "a TLS handshake failed"
			}
			r.now[dependency] = fmt.Sprintf("%s refuses relay's credential (%s); check %s", dependency, what, variables)
		case !refused && was:
			delete(r.now, dependency)
		}
		r.mu.Unlock()
		switch {
		case refused && !was:
			log.Error("a dependency refuses relay's credential: no record is at fault; records wait within their retry budget and relay reports not ready until it is fixed",
				"dependency", dependency, "status", status, "check", variables)
		case !refused && was:
			log.Info("a dependency accepts relay's credential again", "dependency", dependency)
		}
	}
}

// RefusedBy reports whether dependency refuses relay's credential now.
func (m *Metrics) RefusedBy(dependency string) bool {
	m.refused.mu.Lock()
	defer m.refused.mu.Unlock()
	_, ok := m.refused.now[dependency]
	return ok
}

// Refused says which dependencies refuse relay's credential now, "" when
// none does.
func (m *Metrics) Refused() string {
	r := &m.refused
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.now))
	for _, why := range r.now {
		out = append(out, why)
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// refusedGauge registers MetricCredentialRefused for both dependencies.
func (m *Metrics) refusedGauge(meter metric.Meter) error {
	_, err := meter.Int64ObservableGauge(MetricCredentialRefused, describe(MetricCredentialRefused),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			m.refused.mu.Lock()
			defer m.refused.mu.Unlock()
			for _, dep := range []string{DependencyRegistry, DependencyHook} {
				var v int64
				if _, ok := m.refused.now[dep]; ok {
					v = 1
				}
				o.Observe(v, metric.WithAttributes(attribute.String("dependency", dep)))
			}
			return nil
		}))
	return err
}
