package schema

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

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
