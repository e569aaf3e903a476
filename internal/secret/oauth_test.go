package secret

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A token is kept until a fifth of its life (at most 30 s) is left, then
// replaced; the client secret is read at each request for one, so a
// rotated secret is used from the next.
func TestClientCredentialsRefreshAndRotation(t *testing.T) {
	var issued atomic.Int64
	var want atomic.Value
	want.Store("first")
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, sec, _ := r.BasicAuth()
		if id != "relay" || sec != want.Load().(string) || r.FormValue("scope") != "registry" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		_, _ = fmt.Fprintf(w, `{"access_token":"tok-%d","expires_in":1}`, issued.Add(1))
	}))
	defer idp.Close()
	v := Fixed("RELAY_SCHEMA_REGISTRY_OAUTH_CLIENT_SECRET", "first")
	cc := &ClientCredentials{TokenURL: idp.URL, ClientID: "relay", Secret: v, Scope: "registry"}
	for i := range 2 {
		if tok, err := cc.Token(context.Background()); err != nil || tok != "tok-1" {
			t.Fatalf("call %d: %q %v", i, tok, err)
		}
	}
	time.Sleep(900 * time.Millisecond) // past 4/5 of the 1 s life
	if tok, err := cc.Token(context.Background()); err != nil || tok != "tok-2" {
		t.Fatalf("after its life: %q %v", tok, err)
	}
	// The endpoint now wants another secret: refused, with its status.
	want.Store("second")
	time.Sleep(900 * time.Millisecond)
	_, err := cc.Token(context.Background())
	var te *TokenError
	if !errors.As(err, &te) || te.Status != http.StatusUnauthorized {
		t.Fatalf("refused: %v", err)
	}
	v.cur.Store(ptr("second")) // the file rotated
	if tok, err := cc.Token(context.Background()); err != nil || tok != "tok-3" {
		t.Fatalf("after the rotation: %q %v", tok, err)
	}
}

func ptr(s string) *string { return &s }
