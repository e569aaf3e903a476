package k8s

import (
	"context"
	"fmt"
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
// and keeps, per calling pod (its address), the tokens it saw. hold makes
// it hold one pod's calls a while before the answer.
type hook struct {
	url     string
	accept  atomic.Value // string: the one token taken
	refused atomic.Int64

	mu      sync.Mutex
	tokens  map[string]map[string]int // pod address -> token -> calls
	slow    string                    // the pod whose calls are held
	delay   time.Duration
	held    int // calls held
	holding int // calls being held
	cut     int // held calls the caller gave up on before the answer
}

func (c *cluster) hook(t *testing.T, token string) *hook {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(c.nodeIP(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	h := &hook{url: "http://" + ln.Addr().String() + "/hook", tokens: map[string]map[string]int{}}
	h.accept.Store(token)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return h
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	pod, _, _ := net.SplitHostPort(r.RemoteAddr)
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
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
	d := h.delay
	if pod != h.slow {
		d = 0
	} else {
		h.held++
		h.holding++
	}
	h.mu.Unlock()
	if d > 0 {
		defer func() {
			h.mu.Lock()
			h.holding--
			h.mu.Unlock()
		}()
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			h.mu.Lock()
			h.cut++ // relay gave up on the call
			h.mu.Unlock()
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// hold holds every later call of pod d before its answer.
func (h *hook) hold(pod string, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.slow, h.delay = pod, d
}

// heldCalls says how many calls were held, and how many of those the
// caller gave up on before the answer.
func (h *hook) heldCalls() (held, cut int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held, h.cut
}

// calls is how many calls pod made with token.
func (h *hook) calls(pod, token string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tokens[pod][token]
}

// holdingNow is how many calls are being held.
func (h *hook) holdingNow() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holding
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
