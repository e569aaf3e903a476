package telemetry

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestEndpoints(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Listen(context.Background(), "127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + srv.Addr()

	if code, _ := get(t, base+"/livez"); code != http.StatusOK {
		t.Errorf("/livez = %d, want 200", code)
	}
	// A startup probe passes once the loop has gone round, not before
	// (/livez answers 200 from the start).
	if code, _ := get(t, base+"/startupz"); code != http.StatusServiceUnavailable {
		t.Errorf("/startupz before the loop goes round = %d, want 503", code)
	}
	m.Alive()
	if code, _ := get(t, base+"/startupz"); code != http.StatusOK {
		t.Errorf("/startupz once the loop went round = %d, want 200", code)
	}
	if code, _ := get(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the loop consumes = %d, want 503", code)
	}
	m.Ready(true)
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz while consuming = %d, want 200", code)
	}
	// A refused credential makes relay not ready until it is accepted.
	var logs strings.Builder
	access := m.Access(DependencyHook, "RELAY_HOOK_TOKEN", slog.New(slog.NewTextHandler(&logs, nil)))
	access(true, 401)
	access(true, 401)
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "RELAY_HOOK_TOKEN") {
		t.Errorf("/readyz while the hook refuses relay = %d %q, want 503 naming the variable", code, body)
	}
	if _, body := get(t, base+"/metrics"); !strings.Contains(body, `relay_dependency_credential_refused{dependency="hook"} 1`) ||
		!strings.Contains(body, `relay_dependency_credential_refused{dependency="schema_registry"} 0`) {
		t.Errorf("metrics while refused:\n%s", body)
	}
	access(false, 204)
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz once the hook accepts relay = %d, want 200", code)
	}
	if n := strings.Count(logs.String(), "refuses relay's credential"); n != 1 || !strings.Contains(logs.String(), "accepts relay's credential again") {
		t.Errorf("logged %d refusals (want one per episode):\n%s", n, logs.String())
	}

	m.Assigned(3)
	m.Consumed(7)
	m.Committed(5, 6, 20*time.Millisecond)
	m.Aborted("handler")
	_, body := get(t, base+"/metrics")
	for _, want := range []string{
		"relay_records_consumed_total 7",
		"relay_records_committed_total 5",
		"relay_outputs_committed_total 6",
		"relay_transactions_committed_total 1",
		`relay_transactions_aborted_total{reason="handler"} 1`,
		"relay_commit_duration_seconds_count 1",
		"relay_partitions_assigned 3",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestListenOnTakenPortFails(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Listen(context.Background(), "127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close(context.Background()) }()
	if _, err := Listen(context.Background(), a.Addr(), m); err == nil || !strings.Contains(err.Error(), a.Addr()) {
		t.Fatalf("second Listen on %s: %v, want an error naming the address", a.Addr(), err)
	}
}

// /livez fails once the loop has gone round and then made no progress for
// longer than the bound; before the loop starts it is live.
func TestLivezDetectsAStuckLoop(t *testing.T) {
	m, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close(context.Background()) }()
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	m.SetLivenessBound(time.Minute)
	if why := m.stuck(); why != "" {
		t.Fatalf("stuck before the loop started: %s", why)
	}
	m.Alive()
	now = now.Add(59 * time.Second)
	if why := m.stuck(); why != "" {
		t.Fatalf("stuck within the bound: %s", why)
	}
	now = now.Add(2 * time.Second)
	if m.stuck() == "" {
		t.Fatal("not stuck past the bound")
	}
	m.Alive()
	if why := m.stuck(); why != "" {
		t.Fatalf("still stuck after progress: %s", why)
	}
}
