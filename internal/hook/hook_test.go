package hook

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"relay/internal/tiers"
)

func TestStatusMapping(t *testing.T) {
	cases := []struct {
		status int
		body   string
		header string
		code   string // "" = processed
		after  time.Duration
	}{
		{200, "", "", "", 0},
		{204, "", "", "", 0},
		{200, `{"record":{"id":"x2"}}`, "", "", 0},
		{422, `{"code":"unknown tenant"}`, "", "REJECTED_UNKNOWN_TENANT", 0},
		{422, ``, "", "REJECTED_HOOK", 0},
		{400, ``, "", tiers.CodeHookInvalidInput, 0},
		{429, ``, "7", tiers.CodeHookRateLimited, 7 * time.Second},
		{503, ``, "", tiers.CodeHookUnavailable, 0},
		{500, ``, "", tiers.CodeHookUnavailable, 0},
		{401, ``, "", tiers.CodeHookUnauthorized, 0},
		{403, `{"error":"forbidden"}`, "", tiers.CodeHookUnauthorized, 0},
		{302, ``, "", tiers.CodeHookUnexpectedStatus, 0},
		{404, ``, "", tiers.CodeHookUnexpectedStatus, 0},
		{200, `not json`, "", tiers.CodeHookUnexpectedStatus, 0},
	}
	for _, tc := range cases {
		var gotKey string
		var gotReq Request
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gotKey = r.Header.Get("Idempotency-Key")
			_ = json.NewDecoder(r.Body).Decode(&gotReq)
			if tc.header != "" {
				w.Header().Set("Retry-After", tc.header)
			}
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.body))
		}))
		c := New(srv.URL, time.Second, 1, nil, nil)
		rec, err := c.Call(context.Background(), &Request{MessageID: "orders/1/2", Topic: "orders", Partition: 1, Offset: 2, Record: map[string]any{"id": "x"}})
		srv.Close()
		if gotKey != "orders/1/2" || gotReq.MessageID != "orders/1/2" || gotReq.Record["id"] != "x" {
			t.Errorf("%d: request key %q body %+v", tc.status, gotKey, gotReq)
		}
		if tc.code == "" {
			if err != nil {
				t.Errorf("%d: %v", tc.status, err)
			}
			if tc.body != "" && rec["id"] != "x2" {
				t.Errorf("%d: replacement %v", tc.status, rec)
			}
			continue
		}
		if _, code := tiers.Classify(err); code != tc.code {
			t.Errorf("%d %s: code %s, want %s", tc.status, tc.body, code, tc.code)
		}
		var e *tiers.Error
		if errors.As(err, &e) && e.RetryAfter != tc.after {
			t.Errorf("%d: retry after %s, want %s", tc.status, e.RetryAfter, tc.after)
		}
	}
}

func TestTimeoutAndRefusedAreTransient(t *testing.T) {
	stop := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer slow.Close()
	defer close(stop)
	start := time.Now()
	_, err := New(slow.URL, 100*time.Millisecond, 1, nil, nil).Call(context.Background(), &Request{MessageID: "a/0/1"})
	if _, code := tiers.Classify(err); code != tiers.CodeHookUnavailable || time.Since(start) > 2*time.Second {
		t.Fatalf("timeout: %v after %s", err, time.Since(start))
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	_ = l.Close()
	_, err = New("http://"+addr, time.Second, 1, nil, nil).Call(context.Background(), &Request{MessageID: "a/0/1"})
	if _, code := tiers.Classify(err); code != tiers.CodeHookUnavailable {
		t.Fatalf("refused: %v", err)
	}
}

// observed records what an Observer hears.
type observed struct {
	mu       sync.Mutex
	inFlight int
	outcomes []string
}

func (o *observed) HookStarted() { o.mu.Lock(); o.inFlight++; o.mu.Unlock() }
func (o *observed) HookEnded(outcome string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inFlight--
	if d <= 0 {
		outcome += " (no duration)"
	}
	o.outcomes = append(o.outcomes, outcome)
}

// Every request is measured, once, with what came of it: an answer by
// its status, no answer in time, no connection.
func TestEveryRequestIsObserved(t *testing.T) {
	statuses := []int{200, 204, 422, 400, 429, 401, 503, 302}
	i := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(BatchHeader) != "" {
			_, _ = w.Write([]byte(`{"results":[{"messageId":"t/0/4","status":204}]}`))
			return
		}
		w.WriteHeader(statuses[i])
	}))
	defer srv.Close()
	c := New(srv.URL, 100*time.Millisecond, 2, nil, nil)
	o := &observed{}
	c.Observe(o)
	for i = range statuses {
		_, _ = c.Call(context.Background(), &Request{MessageID: "t/0/1"})
	}
	slowSrv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(300 * time.Millisecond) }))
	defer slowSrv.Close()
	slow := New(slowSrv.URL, 100*time.Millisecond, 2, nil, nil)
	slow.Observe(o)
	_, _ = slow.Call(context.Background(), &Request{MessageID: "t/0/2"})
	gone := New("http://127.0.0.1:1", 100*time.Millisecond, 2, nil, nil)
	gone.Observe(o)
	_, _ = gone.Call(context.Background(), &Request{MessageID: "t/0/3"})
	// A batch is one request.
	if _, err := NewBatcher(c, 4, 4).Call(context.Background(), &Request{MessageID: "t/0/4"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"ok", "ok", "rejected", "invalid", "rate_limited", "refused", "unavailable", "unexpected", "timeout", "error", "ok"}
	if !slices.Equal(o.outcomes, want) || o.inFlight != 0 {
		t.Fatalf("outcomes %v (in flight %d), want %v", o.outcomes, o.inFlight, want)
	}
}
