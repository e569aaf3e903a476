package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// carrier is a map as the propagator's carrier.
type carrier map[string]string

func (c carrier) Get(k string) string { return c[k] }
func (c carrier) Set(k, v string)     { c[k] = v }
func (c carrier) Keys() []string      { return []string{TraceParent, TraceState} }

// viaPropagator is what the SDK's W3C propagator reads from the headers.
func viaPropagator(parent, state string) trace.SpanContext {
	return trace.SpanContextFromContext(Propagator.Extract(context.Background(), carrier{TraceParent: parent, TraceState: state}))
}

var parents = []string{
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04", // a reserved flag in 00
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
	"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", // upper case
	"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
	"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-future",
	"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0901",
	"fe-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
	"0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"",
	"garbage",
}

var states = []string{"", "congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "not a tracestate=="}

func TestParentAgreesWithThePropagator(t *testing.T) {
	for _, p := range parents {
		for _, s := range states {
			got, want := Parent([]byte(p), []byte(s)), viaPropagator(p, s)
			if !got.Equal(want) {
				t.Errorf("%q %q: %v, the propagator reads %v", p, s, got, want)
			}
		}
	}
}

func FuzzParentAgreesWithThePropagator(f *testing.F) {
	for _, p := range parents {
		for _, s := range states {
			f.Add(p, s)
		}
	}
	f.Fuzz(func(t *testing.T, p, s string) {
		if got, want := Parent([]byte(p), []byte(s)), viaPropagator(p, s); !got.Equal(want) {
			t.Fatalf("%q %q: %v, the propagator reads %v", p, s, got, want)
		}
	})
}

func TestContextOfWritesWhatThePropagatorWrites(t *testing.T) {
	for _, p := range parents {
		for _, s := range states {
			sc := viaPropagator(p, s)
			want := carrier{}
			Propagator.Inject(trace.ContextWithSpanContext(context.Background(), sc), want)
			got := ContextOf(sc)
			if string(got.Parent) != want[TraceParent] || string(got.State) != want[TraceState] {
				t.Errorf("%q %q: wrote %q %q, the propagator %q %q", p, s, got.Parent, got.State, want[TraceParent], want[TraceState])
			}
			if sc.IsValid() && !Parent(got.Parent, got.State).Equal(sc) {
				t.Errorf("%q %q: does not read back", p, s)
			}
		}
	}
}

func TestParentAndContextOfAllocateLittle(t *testing.T) {
	p, s := []byte(parents[0]), []byte(nil)
	if n := testing.AllocsPerRun(100, func() { _ = Parent(p, s) }); n != 0 {
		t.Errorf("Parent: %v allocations, want 0", n)
	}
	sc := Parent(p, s)
	if n := testing.AllocsPerRun(100, func() { _ = ContextOf(sc) }); n > 1 {
		t.Errorf("ContextOf: %v allocations, want 1", n)
	}
}
