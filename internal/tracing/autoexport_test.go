package tracing

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// OTEL_TRACES_EXPORTER=console is OpenTelemetry's own selection: relay's
// code never built a console exporter, so spans on standard output show
// that the exporter came from autoexport, with no endpoint needed. The
// console exporter holds the standard output the process started with, so
// the test runs itself again as a child and reads the child's.
func TestTheConsoleExporterComesFromOpenTelemetrysSelection(t *testing.T) {
	if os.Getenv("RELAY_TEST_CONSOLE_CHILD") == "1" {
		p, err := New(context.Background(), []string{EnvTracesExporter + "=console"}, "i")
		if err != nil || !p.Enabled() {
			t.Fatalf("enabled %v err %v", p.Enabled(), err)
		}
		_, span := p.Tracer("t").Start(context.Background(), "a console span")
		span.End()
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTheConsoleExporterComesFromOpenTelemetrysSelection$")
	cmd.Env = append(os.Environ(), "RELAY_TEST_CONSOLE_CHILD=1", EnvTracesExporter+"=console") // autoexport reads the process's environment
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"Name":"a console span"`) {
		t.Fatalf("err %v; the child's output has no span: %s", err, out)
	}
}

// none from the process's environment gives autoexport's no-op exporter,
// which relay treats as tracing off, even with an endpoint.
func TestNoneIsNoProvider(t *testing.T) {
	t.Setenv(EnvTracesExporter, "none")
	p, err := New(context.Background(), []string{EnvEndpoint + "=http://127.0.0.1:1", EnvTracesExporter + "=none"}, "i")
	if err != nil || p.Enabled() {
		t.Fatalf("enabled %v err %v", p.Enabled(), err)
	}
}

// autoexport reads the value as one name: a list is refused before it
// is asked, with the variable's name.
func TestAListOfExportersNamesTheVariable(t *testing.T) {
	for _, v := range []string{"otlp,console", "otlp,none", "jaeger"} {
		_, err := New(context.Background(), []string{EnvEndpoint + "=http://c:4318", EnvTracesExporter + "=" + v}, "i")
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), EnvTracesExporter) {
			t.Errorf("%s: err %v", v, err)
		}
	}
}
