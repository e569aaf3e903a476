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
	types    map[int]string      // schemaType; none for Avro
	refs     map[int][]Reference // references of a schema
	nextID   int
	requests atomic.Int64
	// fail, when non-zero, is the status of the next N answers.
	failStatus int
	failN      int
	delay      time.Duration
}

func newFakeRegistry(t *testing.T) (*fakeRegistry, *httptest.Server) {
	f := &fakeRegistry{subjects: map[string][]int{}, texts: map[int]string{}, types: map[int]string{}, refs: map[int][]Reference{}, nextID: 100}
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

// registerAs registers a schema of another type, with references.
func (f *fakeRegistry) registerAs(subject string, typ Format, text string, refs ...Reference) int {
	id := f.register(subject, text)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.types[id], f.refs[id] = string(typ), refs
	return id
}

// schemaJSON is the registry's answer for a schema id.
func (f *fakeRegistry) schemaJSON(id int) map[string]any {
	out := map[string]any{"schema": f.texts[id]}
	if t := f.types[id]; t != "" {
		out["schemaType"] = t
	}
	if rs := f.refs[id]; len(rs) > 0 {
		var refs []map[string]any
		for _, r := range rs {
			refs = append(refs, map[string]any{"name": r.Name, "subject": r.Subject, "version": r.Version})
		}
		out["references"] = refs
	}
	return out
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
		_, ok := f.texts[id]
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
		_ = json.NewEncoder(w).Encode(f.schemaJSON(id))
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
		out := f.schemaJSON(ids[v-1])
		out["subject"], out["version"], out["id"] = parts[1], v, ids[v-1]
		_ = json.NewEncoder(w).Encode(out)
	default:
		http.NotFound(w, r)
	}
}
