package schema

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeRegistry serves the few Confluent API calls relay makes, with failure
// injection. Ids are not consecutive, as in real registries.
type fakeRegistry struct {
	mu       sync.Mutex
	subjects map[string][]int // subject → ids by version-1
	texts    map[int]string
	nextID   int
	requests atomic.Int64
	// fail, when non-zero, is the status of the next N answers.
	failStatus int
	failN      int
	delay      time.Duration
}

func newFakeRegistry(t *testing.T) (*fakeRegistry, *httptest.Server) {
	f := &fakeRegistry{subjects: map[string][]int{}, texts: map[int]string{}, nextID: 100}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeRegistry) register(subject, text string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID += 7
	f.texts[f.nextID] = text
	f.subjects[subject] = append(f.subjects[subject], f.nextID)
	return f.nextID
}

func (f *fakeRegistry) failNext(status, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failStatus, f.failN = status, n
}

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	f.mu.Lock()
	delay := f.delay
	if f.failN > 0 {
		f.failN--
		st := f.failStatus
		f.mu.Unlock()
		http.Error(w, "injected", st)
		return
	}
	defer f.mu.Unlock()
	if delay > 0 {
		f.mu.Unlock()
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
		f.mu.Lock()
	}
	notFound := func() {
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprint(w, `{"error_code":40403,"message":"not found"}`)
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "schemas" && parts[1] == "ids":
		id, _ := strconv.Atoi(parts[2])
		text, ok := f.texts[id]
		if !ok {
			notFound()
			return
		}
		if len(parts) == 4 && parts[3] == "versions" {
			var out []map[string]any
			for s, ids := range f.subjects {
				for i, x := range ids {
					if x == id {
						out = append(out, map[string]any{"subject": s, "version": i + 1})
					}
				}
			}
			_ = json.NewEncoder(w).Encode(out)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"schema": text})
	case len(parts) == 3 && parts[0] == "subjects" && parts[2] == "versions":
		ids := f.subjects[parts[1]]
		if ids == nil {
			notFound()
			return
		}
		vs := make([]int, len(ids))
		for i := range ids {
			vs[i] = i + 1
		}
		_ = json.NewEncoder(w).Encode(vs)
	case len(parts) == 4 && parts[0] == "subjects" && parts[2] == "versions":
		ids := f.subjects[parts[1]]
		v, _ := strconv.Atoi(parts[3])
		if v < 1 || v > len(ids) {
			notFound()
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"subject": parts[1], "version": v, "id": ids[v-1], "schema": f.texts[ids[v-1]]})
	default:
		http.NotFound(w, r)
	}
}
