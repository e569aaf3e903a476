package hook

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
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
		c := New(srv.URL, time.Second, 1, nil)
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
	_, err := New(slow.URL, 100*time.Millisecond, 1, nil).Call(context.Background(), &Request{MessageID: "a/0/1"})
	if _, code := tiers.Classify(err); code != tiers.CodeHookUnavailable || time.Since(start) > 2*time.Second {
		t.Fatalf("timeout: %v after %s", err, time.Since(start))
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	_ = l.Close()
	_, err = New("http://"+addr, time.Second, 1, nil).Call(context.Background(), &Request{MessageID: "a/0/1"})
	if _, code := tiers.Classify(err); code != tiers.CodeHookUnavailable {
		t.Fatalf("refused: %v", err)
	}
}
