package schema

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// blockingRegistry answers schema lookups only once release is closed or,
// with atOnce set, once that many requests are in flight together. It
// records the most it saw in flight.
type blockingRegistry struct {
	atOnce  int
	release chan struct{}

	mu       sync.Mutex
	inFlight int
	most     int
	arrived  chan struct{} // closed when atOnce requests are in flight
}

func newBlockingRegistry(t *testing.T, atOnce int) (*blockingRegistry, *httptest.Server) {
	t.Helper()
	b := &blockingRegistry{atOnce: atOnce, release: make(chan struct{}), arrived: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.inFlight++
		b.most = max(b.most, b.inFlight)
		if b.atOnce > 0 && b.inFlight == b.atOnce {
			close(b.arrived)
		}
		b.mu.Unlock()
		defer func() {
			b.mu.Lock()
			b.inFlight--
			b.mu.Unlock()
		}()
		select {
		case <-b.release:
		case <-b.arrived:
		case <-r.Context().Done():
			return
		case <-time.After(10 * time.Second): // a guard: never reached when calls run at once
		}
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		_, _ = fmt.Fprint(w, `{"schema":"\"string\""}`)
	}))
	t.Cleanup(srv.Close)
	return b, srv
}

func (b *blockingRegistry) mostInFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.most
}

func (b *blockingRegistry) current() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight
}

// Cold lookups of different ids run at once: the registry sees three
// requests in flight together before it answers any of them. Serialised
// calls would each wait out the guard, one at a time.
func TestLookupsOfDifferentIDsRunAtOnce(t *testing.T) {
	b, srv := newBlockingRegistry(t, 3)
	c := NewClient(srv.URL, 30*time.Second)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { _, errs[i] = c.Schema(context.Background(), 100+i) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("lookup %d: %v", i, err)
		}
	}
	if got := b.mostInFlight(); got != 3 {
		t.Fatalf("%d lookups in flight at most, want 3 at once", got)
	}
}

// No more than MaxCalls calls reach the registry at once; a call that
// finds none free waits within its context, and gives up as the registry
// being unavailable.
func TestRegistryCallsAreBounded(t *testing.T) {
	b, srv := newBlockingRegistry(t, 0)
	c := NewClient(srv.URL, 30*time.Second)
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range MaxCalls + 4 {
		wg.Go(func() {
			if _, err := c.Schema(context.Background(), i); err != nil {
				failed.Add(1)
				t.Errorf("lookup %d: %v", i, err)
			}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); b.current() < MaxCalls; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(b.release)
			wg.Wait()
			t.Fatalf("only %d calls reached the registry, want %d", b.current(), MaxCalls)
		}
	}
	// Give the four extra calls the chance to go out, were they not held.
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err := c.Schema(ctx, 999)
	cancel()
	var u *UnavailableError
	if !errors.As(err, &u) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call that found no free connection: %v, want unavailable, deadline exceeded", err)
	}
	close(b.release)
	wg.Wait()
	if got := b.mostInFlight(); got != MaxCalls {
		t.Fatalf("%d calls in flight at most, want the bound %d", got, MaxCalls)
	}
	if failed.Load() != 0 {
		t.Fatalf("%d calls failed", failed.Load())
	}
}
