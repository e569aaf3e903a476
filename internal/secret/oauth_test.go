package secret

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
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
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client","error_description":"client secret sk_live_do_not_echo is wrong","secret_echo":"sk_live_do_not_echo"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
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
	if !errors.As(err, &te) || te.Status != http.StatusUnauthorized || te.Code != "invalid_client" || strings.Contains(err.Error(), "secret_echo") {
		t.Fatalf("refused: %v", err)
	}
	v.cur.Store(ptr("second")) // the file rotated
	if tok, err := cc.Token(context.Background()); err != nil || tok != "tok-3" {
		t.Fatalf("after the rotation: %q %v", tok, err)
	}
}

func ptr(s string) *string { return &s }

// A client that the endpoint refuses in the Authorization header (one
// that wants RFC 6749's client_secret_post) is tried again with its
// credentials in the body, once; the way that worked is kept.
func TestClientCredentialsInTheBody(t *testing.T) {
	var calls atomic.Int64
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if _, _, basic := r.BasicAuth(); basic || r.FormValue("client_id") != "relay" || r.FormValue("client_secret") != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"body-tok","expires_in":3600,"token_type":"Bearer"}`))
	}))
	defer idp.Close()
	cc := &ClientCredentials{TokenURL: idp.URL, ClientID: "relay", Secret: Fixed("S", "s3cret")}
	if tok, err := cc.Token(context.Background()); err != nil || tok != "body-tok" {
		t.Fatalf("%q %v", tok, err)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d calls, want the header's and the body's", calls.Load())
	}
	cc.mu.Lock()
	cc.token = "" // as when it expires
	cc.mu.Unlock()
	if tok, err := cc.Token(context.Background()); err != nil || tok != "body-tok" || calls.Load() != 3 {
		t.Fatalf("the next token: %q %v after %d calls, want one more, in the body", tok, err, calls.Load())
	}
}

// A long, multi-line error description is cut to one short line.
func TestTokenErrorIsShort(t *testing.T) {
	e := &TokenError{Status: 400, Code: "invalid_request", Description: strings.Repeat("x", 500) + "\nsecond line"}
	if msg := e.Error(); len(msg) > 300 || strings.Contains(msg, "\n") {
		t.Fatalf("%d bytes: %q", len(msg), msg)
	}
}
