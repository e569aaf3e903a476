package secret

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A mounted Secret rotates by a symlink swap: ..data points at a new
// directory. Watch sees the new value, on its tick or at once on reload,
// and says which secret changed without its value.
func TestWatchFollowsASymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	for i, v := range []string{"first-s3cret", "second-s3cret"} {
		d := filepath.Join(dir, "v"+string(rune('1'+i)))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "password"), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/password", filepath.Join(dir, "password")); err != nil {
		t.Fatal(err)
	}
	v, err := FromFile("RELAY_HOOK_TOKEN_FILE", filepath.Join(dir, "password"))
	if err != nil || v.Get() != "first-s3cret" {
		t.Fatalf("%v %q", err, v.Get())
	}
	var mu sync.Mutex
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&syncWriter{&mu, &logs}, nil))
	reload := make(chan struct{})
	changed := make(chan *Value, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Watch(ctx, []*Value{v}, time.Hour, reload, func(v *Value) { changed <- v }, log)
	// The swap: a new link renamed over ..data, as the kubelet does.
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink("v2", tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	reload <- struct{}{} // SIGHUP
	select {
	case got := <-changed:
		if got != v || v.Get() != "second-s3cret" {
			t.Fatalf("changed %v to %q", got.Var, v.Get())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the swap was not seen on reload")
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, "RELAY_HOOK_TOKEN_FILE") || strings.Contains(out, "s3cret") {
		t.Fatalf("log must name the secret, not show it:\n%s", out)
	}
	// A file that disappears keeps the value in use.
	if err := os.Remove(filepath.Join(dir, "password")); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Reload(); err == nil || v.Get() != "second-s3cret" {
		t.Fatalf("reload of a missing file: %v, value %q", err, v.Get())
	}
}

type syncWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func TestLookupRefusesBothForms(t *testing.T) {
	env := map[string]string{"X": "a", "X_FILE": "/dev/null"}
	_, _, err := Lookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, "X")
	if err == nil || !strings.Contains(err.Error(), "X: set together with X_FILE") {
		t.Fatalf("%v", err)
	}
}
