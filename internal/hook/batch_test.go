package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"relay/internal/tiers"
)

// batchServer answers batch requests, one result per record by answer.
type batchServer struct {
	mu     sync.Mutex
	sizes  []int
	answer func(id string) map[string]any
	status int // of the whole answer; 0: 200
	trim   bool
}

func (s *batchServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Records []Request `json:"records"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.sizes = append(s.sizes, len(req.Records))
	s.mu.Unlock()
	if n, _ := strconv.Atoi(r.Header.Get(BatchHeader)); n != len(req.Records) {
		http.Error(w, "wrong "+BatchHeader, http.StatusBadRequest)
		return
	}
	if s.status < 0 {
		w.WriteHeader(-s.status)
		return
	}
	if s.status != 0 {
		w.WriteHeader(s.status)
		return
	}
	var results []map[string]any
	for _, rec := range req.Records {
		results = append(results, s.answer(rec.MessageID))
	}
	if s.trim {
		results = results[1:]
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
}

func callAll(t *testing.T, b *Batcher, ids []string) map[string]result {
	t.Helper()
	var mu sync.Mutex
	got := map[string]result{}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			rec, err := b.Call(context.Background(), &Request{MessageID: id, Record: map[string]any{"id": id}})
			mu.Lock()
			got[id] = result{rec, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

func causeOf(err error) tiers.Cause {
	var e *tiers.Error
	if errors.As(err, &e) {
		return e.Cause
	}
	return -1
}

// TestBatchProtocolGivesEachRecordItsResult: records called at once go in
// batches of at most the maximum, and each gets the result the hook gave
// it, with the meaning of a call for it alone.
func TestBatchProtocolGivesEachRecordItsResult(t *testing.T) {
	s := &batchServer{answer: func(id string) map[string]any {
		switch id[:2] {
		case "ok":
			return map[string]any{"messageId": id, "status": 204}
		case "rp":
			return map[string]any{"messageId": id, "status": 200, "record": map[string]any{"amount": 12345678901234}}
		case "rj":
			return map[string]any{"messageId": id, "status": 422, "code": "unknown_tenant"}
		case "rl":
			return map[string]any{"messageId": id, "status": 429, "retryAfter": 2}
		case "dn":
			return map[string]any{"messageId": id, "status": 503}
		case "sw":
			return map[string]any{"messageId": "someone-else", "status": 204}
		}
		return map[string]any{"messageId": id}
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	b := NewBatcher(New(srv.URL, time.Second, 24, nil, nil), 8, 24)
	var ids []string
	for i := range 4 {
		for _, p := range []string{"ok", "rp", "rj", "rl", "dn", "sw", "ns"} {
			ids = append(ids, fmt.Sprintf("%s-%d", p, i))
		}
	}
	got := callAll(t, b, ids)
	for id, r := range got {
		switch id[:2] {
		case "ok":
			if r.err != nil || r.rec != nil {
				t.Errorf("%s: %v %v, want processed as is", id, r.rec, r.err)
			}
		case "rp":
			if r.err != nil || r.rec["amount"] != json.Number("12345678901234") {
				t.Errorf("%s: %v %v, want the replacement with an exact number", id, r.rec, r.err)
			}
		case "rj":
			var e *tiers.Error
			if !errors.As(r.err, &e) || e.Cause != tiers.CauseHookReject || e.Name != "unknown_tenant" {
				t.Errorf("%s: %v, want rejected with its code", id, r.err)
			}
		case "rl":
			var e *tiers.Error
			if !errors.As(r.err, &e) || e.Cause != tiers.CauseHookRateLimited || e.RetryAfter != 2*time.Second {
				t.Errorf("%s: %v, want rate limited for 2s", id, r.err)
			}
		case "dn":
			if causeOf(r.err) != tiers.CauseHookUnavailable {
				t.Errorf("%s: %v, want unavailable", id, r.err)
			}
		case "sw", "ns":
			if causeOf(r.err) != tiers.CauseHookUnexpected {
				t.Errorf("%s: %v, want an unexpected answer", id, r.err)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	most := 0
	for _, n := range s.sizes {
		most = max(most, n)
	}
	if most > 8 || most < 2 {
		t.Errorf("batch sizes %v, want 2..8 records", s.sizes)
	}
}

// TestBatchAnswersForTheWholeBatch: what goes wrong with a batch as a
// whole counts for every record, never as the records' fault: a non-200
// answer as unavailable (429: rate limited), and an answer relay cannot
// read or with the wrong number of results (a hook without the batch
// protocol) as unavailable.
func TestBatchAnswersForTheWholeBatch(t *testing.T) {
	for _, tc := range []struct {
		s    *batchServer
		want tiers.Cause
	}{
		{&batchServer{status: http.StatusNotFound}, tiers.CauseHookUnavailable},
		{&batchServer{status: http.StatusBadRequest}, tiers.CauseHookUnavailable},
		{&batchServer{status: http.StatusTooManyRequests}, tiers.CauseHookRateLimited},
		{&batchServer{trim: true, answer: func(id string) map[string]any { return map[string]any{"status": 204} }}, tiers.CauseHookUnavailable},
		{&batchServer{status: -200}, tiers.CauseHookUnavailable}, // 200 with no body: a hook without the protocol
	} {
		srv := httptest.NewServer(tc.s)
		b := NewBatcher(New(srv.URL, time.Second, 4, nil, nil), 4, 4)
		for id, r := range callAll(t, b, []string{"a", "b", "c", "d"}) {
			if causeOf(r.err) != tc.want {
				t.Errorf("status %d trim %v: %s got %v, want cause %v", tc.s.status, tc.s.trim, id, r.err, tc.want)
			}
		}
		srv.Close()
	}
}

// TestBatchCallerGivesUp: a caller whose context ends gets "unavailable"
// at once (its record stays where it is); the batch answers the others.
func TestBatchCallerGivesUp(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		var req struct {
			Records []Request `json:"records"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		var results []map[string]any
		for range req.Records {
			results = append(results, map[string]any{"status": 204})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
	}))
	defer srv.Close()
	defer close(release)
	b := NewBatcher(New(srv.URL, 5*time.Second, 4, nil, nil), 4, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.Call(ctx, &Request{MessageID: "a"})
	if causeOf(err) != tiers.CauseHookUnavailable || time.Since(start) > 2*time.Second {
		t.Fatalf("%v after %s, want unavailable at its deadline", err, time.Since(start))
	}
}

// TestBatchCallWithdrawnBeforeItIsSent: a call whose context ends while it
// waits for a request in flight is not sent at all (a late copy could
// reach the hook after the record's next call).
func TestBatchCallWithdrawnBeforeItIsSent(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Records []Request `json:"records"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		for _, rec := range req.Records {
			seen = append(seen, rec.MessageID)
		}
		mu.Unlock()
		<-release
		results := make([]map[string]any, len(req.Records))
		for i := range results {
			results[i] = map[string]any{"status": 204}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
	}))
	defer srv.Close()
	b := NewBatcher(New(srv.URL, 5*time.Second, 1, nil, nil), 4, 1) // one request in flight at most
	first := make(chan error, 1)
	go func() {
		_, err := b.Call(context.Background(), &Request{MessageID: "a"})
		first <- err
	}()
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.Call(ctx, &Request{MessageID: "b"}); causeOf(err) != tiers.CauseHookUnavailable {
		t.Fatalf("b: %v, want unavailable at its deadline", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("the hook saw %v, want only a (b was withdrawn)", seen)
	}
}
