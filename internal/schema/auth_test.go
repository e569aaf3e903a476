package schema

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/secret"
	"relay/internal/tiers"
)

// A registry that refuses relay's credential says so with 401 or 403, with
// or without a JSON body (a proxy in front of it rarely sends one):
// neither is an outage, and neither is the record's fault.
func TestRefusedCredentialIsUnauthorizedNotUnavailable(t *testing.T) {
	var status int
	var body string
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	c := NewClient(srv.URL, time.Second)
	password := "p1"
	c.Authenticate(Auth{User: "key", Password: func() string { return password }})
	var heard []string
	c.OnAccess(func(refused bool, st int) { heard = append(heard, strconv.FormatBool(refused)+"/"+strconv.Itoa(st)) })
	for _, tc := range []struct {
		status int
		body   string
	}{{401, `{"error_code":40101,"message":"Unauthorized"}`}, {403, ``}, {401, `{"message":"no code"}`}} {
		status, body = tc.status, tc.body
		_, err := c.Schema(context.Background(), 1)
		var un *UnauthorizedError
		var unavailable *UnavailableError
		if !errors.As(err, &un) || un.Status != tc.status || errors.As(err, &unavailable) {
			t.Fatalf("%d %s: %v; want an *UnauthorizedError", tc.status, tc.body, err)
		}
		if _, code := tiers.Classify(registryFailure(1, err)); code != tiers.CodeSchemaRegistryUnauthorized {
			t.Fatalf("%d: record code %s", tc.status, code)
		}
	}
	password = "p2" // rotated in its file: the next request carries it
	status, body = 200, `{"schema":"\"string\""}`
	if _, err := c.Schema(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(heard, " "); got != "true/401 true/403 true/401 false/200" {
		t.Fatalf("heard %q", got)
	}
	if auth[0] != "Basic a2V5OnAx" || auth[len(auth)-1] != "Basic a2V5OnAy" { // key:p1, key:p2
		t.Fatalf("Authorization %q", auth)
	}
}

func TestBearerTokenWithoutUser(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		_, _ = w.Write([]byte(`{"schema":"\"string\""}`))
	}))
	defer srv.Close()
	c := NewClient(srv.URL, time.Second)
	c.Authenticate(Auth{Password: func() string { return "tok" }})
	if _, err := c.Schema(context.Background(), 1); err != nil || got != "Bearer tok" {
		t.Fatalf("%v, Authorization %q", err, got)
	}
}

// With OAuth client credentials, relay asks the token endpoint once, sends
// the token until shortly before it expires, and a token endpoint that
// refuses relay's client credentials is a refusal, not an outage.
func TestRegistryTokenFromClientCredentials(t *testing.T) {
	var issued, refuse atomic.Int64
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, sec, _ := r.BasicAuth(); id != "relay" || sec != "s3cret" || refuse.Load() == 1 || r.FormValue("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		n := issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":3600}`, n)
	}))
	defer idp.Close()
	var got []string
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"schema":"\"string\""}`))
	}))
	defer reg.Close()
	cc := &secret.ClientCredentials{TokenURL: idp.URL, ClientID: "relay", Secret: secret.Fixed("S", "s3cret")}
	c := NewClient(reg.URL, time.Second)
	c.Authenticate(Auth{Token: cc.Token})
	for range 3 {
		if _, err := c.Schema(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
	}
	if issued.Load() != 1 || strings.Join(got, ",") != "Bearer tok-1,Bearer tok-1,Bearer tok-1" {
		t.Fatalf("issued %d, Authorization %v", issued.Load(), got)
	}
	refuse.Store(1)
	cc2 := &secret.ClientCredentials{TokenURL: idp.URL, ClientID: "relay", Secret: secret.Fixed("S", "wrong")}
	c2 := NewClient(reg.URL, time.Second)
	c2.Authenticate(Auth{Token: cc2.Token})
	_, err := c2.Schema(context.Background(), 1)
	var un *UnauthorizedError
	if !errors.As(err, &un) || un.Status != http.StatusUnauthorized {
		t.Fatalf("refused client credentials: %v", err)
	}
}
