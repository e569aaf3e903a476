package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"relay/internal/audit"
	"relay/internal/console"
	"relay/internal/ledger"
	"relay/internal/telemetry"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeSeries are the series Prometheus adds to every target it scrapes,
// which rules may use next to relay's own.
var scrapeSeries = []string{"up"}

// exposition is what relay's /metrics shows: every sample name (a
// histogram's _bucket, _sum and _count), and each family's type.
type exposition struct {
	samples map[string]bool
	types   map[string]string
}

var (
	scrapeOnce sync.Once
	scraped    exposition
	scrapeErr  error
)

// exported starts relay's telemetry as the daemon does (telemetry.New, and
// the /metrics endpoint of telemetry.Listen), gives every instrument a
// series, and reads /metrics once for all the tests.
func exported(t *testing.T) exposition {
	t.Helper()
	scrapeOnce.Do(func() { scraped, scrapeErr = scrapeRelay() })
	if scrapeErr != nil {
		t.Fatal(scrapeErr)
	}
	return scraped
}

func scrapeRelay() (exposition, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := telemetry.New(nil)
	if err != nil {
		return exposition{}, err
	}
	defer func() { _ = m.Close(ctx) }()
	exercise(m)
	srv, err := telemetry.Listen(ctx, "127.0.0.1:0", m)
	if err != nil {
		return exposition{}, err
	}
	defer func() { _ = srv.Close(ctx) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+srv.Addr()+"/metrics", nil)
	if err != nil {
		return exposition{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return exposition{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	e, err := parseExposition(resp.Body)
	if err != nil {
		return e, err
	}
	// relay audit's metrics, as its --metrics-file and --push-url give
	// them, of a completed --cursor run (which has every series).
	path := filepath.Join(os.TempDir(), fmt.Sprintf("relay-audit-%d.prom", os.Getpid()))
	defer func() { _ = os.Remove(path) }()
	// A --cursor run's, which adds how far it has judged.
	oldest := time.Now().Add(-time.Hour)
	run := &audit.RunResult{Source: "orders", At: time.Now(), Report: &audit.Report{Source: "orders", Clean: true, Totals: map[audit.Kind]int64{}, Unjudged: 3, OldestUnjudged: &oldest}}
	if err := run.WriteMetrics(path); err != nil {
		return e, err
	}
	f, err := os.Open(path) //nolint:gosec // the test's own file
	if err != nil {
		return e, err
	}
	defer func() { _ = f.Close() }()
	a, err := parseExposition(f)
	if err != nil {
		return e, err
	}
	for k := range a.samples {
		e.samples[k] = true
	}
	for k, v := range a.types {
		e.types[k] = v
	}
	// relay console's own (its /metrics).
	var b bytes.Buffer
	fams, err := console.Metrics().Gather()
	if err != nil {
		return e, err
	}
	for _, mf := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			return e, err
		}
	}
	c, err := parseExposition(&b)
	for k := range c.samples {
		e.samples[k] = true
	}
	for k, v := range c.types {
		e.types[k] = v
	}
	return e, err
}

// exercise gives every instrument a series. The counters a dashboard sums
// and the outcomes have one from the start, at 0; the others appear with
// what they count (an abort's reason, a histogram's first observation, a
// gauge's source), through the calls the daemon makes.
func exercise(m *telemetry.Metrics) {
	now := time.Now()
	m.Assigned(2)
	m.Stalled(0)
	m.Consumed(1)
	m.Committed(1, 1, 5*time.Millisecond)
	m.Aborted("handler")
	m.Wedged("send offsets")
	m.HookStarted()
	m.HookEnded("ok", 20*time.Millisecond)
	m.Outcome(ledger.OutcomeQuarantined, "SCHEMA_UNSUPPORTED", 1)
	m.Ended(ledger.OutcomeProcessed, 2, time.Second)
	m.Replayed("failed-again", 1)
	m.SetLag(func() []telemetry.Lag { return []telemetry.Lag{{Topic: "orders", Partition: 0, Records: 3}} })
	m.SetFeatures(func() map[string]bool { return map[string]bool{"park": true} })
	m.SetParked(func() telemetry.Parked {
		return telemetry.Parked{Records: 2, Bytes: 900, Behind: []telemetry.Lag{{Topic: "orders", Partition: 0, Records: 40}}, Refused: map[string]int64{"records": 1}}
	})
	m.SetSpansDropped(func() int64 { return 0 })
	m.SetQuarantine(func() ledger.Summary {
		return ledger.Summary{
			ByCode:   []ledger.CodeStats{{Code: "SCHEMA_UNSUPPORTED", Unresolved: 1, Oldest: now.Add(-time.Hour)}},
			Deadline: map[string]time.Time{"orders.quarantine": now.Add(30 * 24 * time.Hour)},
			ByTopic:  map[string]int{"orders.quarantine": 1},
		}
	})
	m.SetOwners([]telemetry.Ownership{{Topic: "orders.quarantine", Owner: "payments-team", Threshold: 100}})
	// librdkafka's statistics, as the telemetry package's tests keep them.
	if doc, err := os.ReadFile("../internal/telemetry/testdata/rdkafka-stats.json"); err == nil {
		m.Statistics("producer", string(doc))
		m.Statistics("consumer", string(doc))
	}
}

// parseExposition reads the Prometheus text format (expfmt): each
// family's type, and the names of its samples (a histogram's _bucket,
// _sum and _count).
func parseExposition(r io.Reader) (exposition, error) {
	e := exposition{samples: map[string]bool{}, types: map[string]string{}}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return e, err
	}
	for name, f := range fams {
		e.types[name] = strings.ToLower(f.GetType().String())
		if len(f.GetMetric()) == 0 {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			e.samples[name+"_bucket"], e.samples[name+"_sum"], e.samples[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			e.samples[name], e.samples[name+"_sum"], e.samples[name+"_count"] = true, true, true
		default:
			e.samples[name] = true
		}
	}
	return e, nil
}

// missing says why name is not one relay exports, or "" when it is (or is
// a series Prometheus adds,).
func (e exposition) missing(name string) string {
	if e.samples[name] || slices.Contains(scrapeSeries, name) {
		return ""
	}
	why := name + " is not a metric relay exports"
	switch {
	case e.types[name] == "histogram":
		why += " (it is a histogram: use " + name + "_bucket, _sum or _count)"
	case e.samples[name+"_total"]:
		why += " (a counter: " + name + "_total)"
	}
	return why
}

// checkNames fails for each selector of expr whose name relay does not
// export; where says which query it is.
func checkNames(t *testing.T, e exposition, where, expr string) {
	t.Helper()
	sels, err := selectors(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if len(sels) == 0 {
		t.Errorf("%s: no metric in %q", where, expr)
	}
	for _, s := range sels {
		if why := e.missing(s.name); why != "" {
			t.Errorf("%s: %s", where, why)
		}
	}
}

// The scrape covers every instrument of relay's, with its Prometheus
// name, and the Go runtime and process collectors.
func TestTheScrapeShowsEveryInstrument(t *testing.T) {
	e := exported(t)
	for _, in := range telemetry.Instruments {
		if _, ok := e.types[in.PrometheusName()]; !ok {
			t.Errorf("%s has no series in the scrape: have exercise() make one", in.PrometheusName())
		}
	}
	for _, name := range []string{"go_goroutines", "process_start_time_seconds", "process_resident_memory_bytes", "process_cpu_seconds_total"} {
		if !e.samples[name] {
			t.Errorf("%s (Go runtime or process collector) is not in the scrape", name)
		}
	}
}
