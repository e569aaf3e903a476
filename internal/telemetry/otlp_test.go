package telemetry

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"

	"relay/internal/ledger"
)

// With OTEL_EXPORTER_OTLP_ENDPOINT set, the same instruments go to an OTLP
// collector over HTTP: here a fake one that keeps the bodies it gets.
func TestOTLPExportsTheSameInstruments(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var bodies bytes.Buffer
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path)
		bodies.Write(b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "100")
	m, err := New([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL})
	if err != nil {
		t.Fatal(err)
	}
	m.SetQuarantine(func() ledger.Summary {
		return ledger.Summary{ByCode: []ledger.CodeStats{{Code: "HOOK_INVALID_INPUT", Unresolved: 2, Oldest: time.Now().Add(-time.Hour)}}}
	})
	m.Outcome("quarantined", "HOOK_INVALID_INPUT", 2)
	m.Replayed("resolved", 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := bodies.String()
		p := append([]string{}, paths...)
		mu.Unlock()
		if strings.Contains(got, MetricUnresolved) && strings.Contains(got, MetricReplayOutcomes) && strings.Contains(got, "HOOK_INVALID_INPUT") {
			if p[0] != "/v1/metrics" {
				t.Fatalf("posted to %s, want /v1/metrics", p[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector did not get relay's metrics: %d posts", len(p))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestOTLPOverGRPCStartsWithoutACollector(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	m, err := New([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"})
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_ = m.Close(c) // nothing listens: bounded, whatever it says
}

func TestOTLPUnknownProtocolNamesTheVariable(t *testing.T) {
	_, err := New([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4317", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=thrift"})
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") {
		t.Fatalf("err %v", err)
	}
}

// A collector that refuses the exports: their points are counted as
// dropped, in relay_metrics_points_dropped_total on /metrics; once it
// takes them again, the count stops growing.
func TestRefusedExportsCountTheirPoints(t *testing.T) {
	var refuse atomic.Bool
	refuse.Store(true)
	var taken atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if refuse.Load() {
			http.Error(w, "no", http.StatusBadRequest) // not retried by the exporter
			return
		}
		taken.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL) // the exporter reads the process's
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "50")
	m, err := New([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close(context.Background()) }()
	waitFor(t, "a refused export", func() bool { return m.PointsDropped() > 0 })
	refuse.Store(false)
	n := taken.Load()
	waitFor(t, "two exports taken", func() bool { return taken.Load() >= n+2 })
	dropped := m.PointsDropped()
	waitFor(t, "one more export taken", func() bool { return taken.Load() >= n+3 })
	if m.PointsDropped() != dropped {
		t.Fatalf("dropped went from %d to %d while the collector took every export", dropped, m.PointsDropped())
	}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "relay_metrics_points_dropped_total" {
			if got := f.GetMetric()[0].GetCounter().GetValue(); got != float64(dropped) {
				t.Fatalf("/metrics says %v points dropped, want %d", got, dropped)
			}
			return
		}
	}
	t.Fatal("relay_metrics_points_dropped_total is not on /metrics")
}

// waitFor polls cond for up to 10 s (an event, not a duration, is what the
// test is about).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 10 s", what)
		}
	}
}

// A partial success is an export the collector took: only the points it
// says it rejected are dropped (none, for a warning).
func TestPartialSuccessCountsOnlyTheRejectedPoints(t *testing.T) {
	for _, rejected := range []int64{0, 3} {
		var answered atomic.Int64
		collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			body, err := proto.Marshal(&colmetricpb.ExportMetricsServiceResponse{PartialSuccess: &colmetricpb.ExportMetricsPartialSuccess{
				RejectedDataPoints: rejected, ErrorMessage: "a deprecated attribute"}})
			if err != nil {
				t.Error(err)
			}
			w.Header().Set("Content-Type", "application/x-protobuf")
			_, _ = w.Write(body)
			answered.Add(1)
		}))
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
		t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "50")
		m, err := New([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "three answered exports", func() bool { return answered.Load() >= 3 })
		_ = m.Close(context.Background())
		collector.Close()
		n := answered.Load()
		if got := m.PointsDropped(); got < rejected*(n-1) || got > rejected*(n+1) {
			t.Errorf("%d rejected per export, %d exports answered: %d points counted dropped", rejected, n, got)
		}
	}
}

// OTEL_METRICS_EXPORTER=console is OpenTelemetry's own selection
// (autoexport): relay's metrics on standard output, no endpoint needed.
func TestTheConsoleMetricReaderComesFromOpenTelemetrysSelection(t *testing.T) {
	t.Setenv("OTEL_METRICS_EXPORTER", "console")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = old }()
	out := make(chan string)
	go func() { b, _ := io.ReadAll(r); out <- string(b) }()
	m, err := New([]string{"OTEL_METRICS_EXPORTER=console"})
	if err != nil {
		t.Fatal(err)
	}
	m.HookTimedOut()
	if err := m.Close(context.Background()); err != nil { // the last collection is written
		t.Fatal(err)
	}
	os.Stdout = old
	_ = w.Close()
	if s := <-out; !strings.Contains(s, MetricRecordsConsumed) {
		t.Fatalf("standard output has no relay metric: %.300q", s)
	}
}

// prometheus and none add no reader (relay's /metrics is the Prometheus
// one: autoexport's own listener is never started); a list, or another
// name, is refused with the variable's name.
func TestMetricsExporterValues(t *testing.T) {
	const ep = "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1"
	for _, v := range []string{"prometheus", "none"} {
		var d atomic.Int64
		if r, err := otlpReader([]string{ep, "OTEL_METRICS_EXPORTER=" + v}, &d); r != nil || err != nil {
			t.Errorf("%s: reader %v err %v", v, r, err)
		}
	}
	for _, v := range []string{"otlp,prometheus", "zipkin"} {
		var d atomic.Int64
		if _, err := otlpReader([]string{ep, "OTEL_METRICS_EXPORTER=" + v}, &d); err == nil || !strings.Contains(err.Error(), "OTEL_METRICS_EXPORTER") {
			t.Errorf("%s: err %v", v, err)
		}
	}
}
