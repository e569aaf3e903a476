package k8s

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// hook is relay's hook, served by the test on the node's address (the
// pods reach the host there): it answers 204 (the record passes as it
// is) to a call that carries the token it accepts, and 401 to any other,
// and keeps, per calling pod (its address), the tokens it saw, and the
// calls per idempotency key (per record). hold makes it hold one pod's
// calls a while before the answer, and keep what became of each.
type hook struct {
	url     string
	accept  atomic.Value // string: the one token taken
	refused atomic.Int64

	mu      sync.Mutex
	tokens  map[string]map[string]int // pod address -> token -> calls
	keys    map[string]int            // Idempotency-Key -> calls
	slow    string                    // the pod whose calls are held
	delay   time.Duration
	held    []heldCall
	holding int // calls being held
}

// heldCall is a call the hook held: when it came, when it ended, and
// whether it was answered (or the caller gave up on it first).
type heldCall struct {
	key        string
	start, end time.Time
	answered   bool
}

func (c *cluster) hook(t *testing.T, token string) *hook {
	t.Helper()
	return serveHook(t, net.JoinHostPort(c.nodeIP(t), "0"), token)
}

func serveHook(t *testing.T, addr, token string) *hook {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	h := &hook{url: "http://" + ln.Addr().String() + "/hook", tokens: map[string]map[string]int{}, keys: map[string]int{}}
	h.accept.Store(token)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return h
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The body read to its end: only then does the server notice a
	// caller that hangs up (and cancel r's context).
	_, _ = io.Copy(io.Discard, r.Body)
	pod, _, _ := net.SplitHostPort(r.RemoteAddr)
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	key := r.Header.Get("Idempotency-Key")
	h.mu.Lock()
	if h.tokens[pod] == nil {
		h.tokens[pod] = map[string]int{}
	}
	h.tokens[pod][token]++
	h.mu.Unlock()
	if token != h.accept.Load().(string) {
		h.refused.Add(1)
		http.Error(w, "unknown token", http.StatusUnauthorized)
		return
	}
	h.mu.Lock()
	h.keys[key]++
	d, i := h.delay, len(h.held)
	if pod != h.slow {
		d = 0
	} else {
		h.held = append(h.held, heldCall{key: key, start: time.Now()})
		h.holding++
	}
	h.mu.Unlock()
	if d == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	answered := false
	select {
	case <-time.After(d):
		w.WriteHeader(http.StatusNoContent)
		answered = true
	case <-r.Context().Done(): // relay gave up on the call
	}
	h.mu.Lock()
	h.holding--
	h.held[i].end, h.held[i].answered = time.Now(), answered
	h.mu.Unlock()
}

// hold holds every later call of pod d before its answer ("", 0: none).
func (h *hook) hold(pod string, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.slow, h.delay = pod, d
}

// holdingNow is how many calls are being held.
func (h *hook) holdingNow() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holding
}

// heldCalls is what became of the calls held so far.
func (h *hook) heldCalls() []heldCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]heldCall(nil), h.held...)
}

// callsFor is how many calls the hook took for a record (its key).
func (h *hook) callsFor(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keys[key]
}

// calls is how many calls pod made with token.
func (h *hook) calls(pod, token string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tokens[pod][token]
}

// seen says which tokens the calls carried, for a failure's message.
func (h *hook) seen() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(h.tokens)
}

// nodeIP is the node's address, where the pods reach the host.
func (c *cluster) nodeIP(t *testing.T) string {
	t.Helper()
	ip := c.node
	if ip == "" {
		t.Fatal("RELAY_TEST_K8S_NODE_IP: the node's address (make test-k8s sets it)")
	}
	return ip
}

// eventually polls cond every second until it holds, or fails the test
// with what after limit (a bound on a wait, never a measure of speed).
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, limit)
		}
		time.Sleep(time.Second)
	}
}

// logged says whether the current container of pod logged a line with
// every one of parts.
func (c *cluster) logged(ns, pod, container string, parts ...string) bool {
	b, err := c.client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// The hook tells a held call it answered from one its caller gave up on
// (without the cluster): the check that relay finishes its calls in
// flight when stopped rests on it.
func TestHookSeesACallerGiveUp(t *testing.T) {
	h := serveHook(t, "127.0.0.1:0", "token")
	h.hold("127.0.0.1", 3*time.Second)
	call := func(ctx context.Context) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, strings.NewReader(`{"record":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer token")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	call(ctx)
	call(context.Background())
	eventually(t, 10*time.Second, "both held calls ended", func() bool {
		calls := h.heldCalls()
		return len(calls) == 2 && !calls[0].end.IsZero() && !calls[1].end.IsZero()
	})
	if calls := h.heldCalls(); calls[0].answered || !calls[1].answered {
		t.Fatalf("held calls %+v: want the first given up on, the second answered", calls)
	}
}
