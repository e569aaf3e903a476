package cli

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"relay/internal/config"
)

// relay config groups every value under where it comes from: a property
// the environment sets is not shown again among relay's librdkafka
// defaults; a secret read from a file shows its path; OTEL_* headers are
// masked.
func TestShowConfigSaysWhereEachValueComesFrom(t *testing.T) {
	vars := map[string]string{
		"RELAY_SOURCE_TOPICS": "orders", "RELAY_TRANSACTIONAL_ID": "relay-0", "RELAY_KAFKA_BOOTSTRAP_SERVERS": "k:9092",
		"RELAY_KAFKA_QUEUED_MAX_MESSAGES_KBYTES": "4096", "RELAY_HOOK_TOKEN_FILE": t.TempDir() + "/token",
		"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer s3cret",
	}
	writeFile(t, vars["RELAY_HOOK_TOKEN_FILE"], "t0ken")
	var environ []string
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := vars[k]; return v, ok }, environ)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	ShowConfig(&b, Table, cfg, environ)
	groups := map[string][]string{}
	title := ""
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if t, ok := strings.CutPrefix(line, "# "); ok {
			title = t
			continue
		}
		groups[title] = append(groups[title], line)
	}
	in := func(group, line string) bool {
		for g, lines := range groups {
			if strings.HasPrefix(g, group) {
				for _, l := range lines {
					if l == line {
						return true
					}
				}
			}
		}
		return false
	}
	for _, c := range []struct{ group, line string }{
		{"RELAY_* and RELAY_KAFKA_*, set in the environment", "RELAY_KAFKA_QUEUED_MAX_MESSAGES_KBYTES=4096"},
		{"RELAY_* and RELAY_KAFKA_*, read from files", "RELAY_HOOK_TOKEN_FILE=" + vars["RELAY_HOOK_TOKEN_FILE"]},
		{"RELAY_* and RELAY_KAFKA_*, derived", "RELAY_KAFKA_TRANSACTION_TIMEOUT_MS=36000"},
		{"RELAY_* and RELAY_KAFKA_*, defaults", "RELAY_COMMIT_INTERVAL=100ms"},
		{"librdkafka properties relay sets on its consumers", "RELAY_KAFKA_CLIENT_ID=relay-consumer"},
		{"librdkafka properties relay sets on its producers", "RELAY_KAFKA_QUEUE_BUFFERING_MAX_KBYTES=16384"},
		{"OTEL_*, set in the environment", "OTEL_EXPORTER_OTLP_HEADERS=authorization=****"},
		{"OTEL_*, defaults", "OTEL_SERVICE_NAME=relay"},
	} {
		if !in(c.group, c.line) {
			t.Errorf("%q is not under %q:\n%s", c.line, c.group, b.String())
		}
	}
	if in("librdkafka properties relay sets on its consumers", "RELAY_KAFKA_QUEUED_MAX_MESSAGES_KBYTES=2048") {
		t.Error("a default the environment overrides is shown as in effect")
	}
	if strings.Contains(b.String(), "t0ken") || strings.Contains(b.String(), "s3cret") {
		t.Errorf("a secret was printed:\n%s", b.String())
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// relay config masks credentials in the OTLP endpoints as it does in
// relay's own URLs, and never shows a header entry it cannot split.
func TestShowConfigMasksOTLPEndpointsAndMalformedHeaders(t *testing.T) {
	environ := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=https://user:s3cret@collector.example:4318/?api_key=k3y",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=https://u:tr4ces@collector.example/v1/traces",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=https://collector.example/v1/metrics?token=m3trics",
		"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer t0ken,Bearer l00se",
	}
	settings := otelSettings(environ)
	for _, s := range settings {
		for _, secret := range []string{"s3cret", "k3y", "tr4ces", "m3trics", "t0ken", "l00se"} {
			if strings.Contains(s.Value, secret) {
				t.Errorf("%s=%s shows %s", s.Name, s.Value, secret)
			}
		}
	}
	if len(settings) == 0 || !strings.Contains(fmt.Sprint(settings), "collector.example:4318") {
		t.Errorf("the endpoint's host is not shown: %v", settings)
	}
}
