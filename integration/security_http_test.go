package integration

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/envelope"
)

// registryTLSURL is Apicurio's HTTPS port (scripts/stack/registry.sh), its
// certificate signed by the stack's CA.
var registryTLSURL = envOr("RELAY_TEST_REGISTRY_TLS", "https://127.0.0.1:8444/apis/ccompat/v7")

// stackCAs is the pool of the stack's CA.
func stackCAs(t *testing.T) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(tlsFile("ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no CA in ca.pem")
	}
	return pool
}

// tlsServer serves h over TLS with the stack's server certificate and
// requires a client certificate signed by the stack's CA, as an
// authenticating front of a service does.
func tlsServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(tlsFile("broker.crt"), tlsFile("broker.key"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: stackCAs(t), MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// writeSecret writes a secret file as a mounted Secret holds it.
func writeSecret(t *testing.T, path, value string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// httpGet is the status and body of url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitHTTP waits until url answers status with a body containing want.
func waitHTTP(t *testing.T, url string, status int, want string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st, body := httpGet(t, url)
		if st == status && strings.Contains(body, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d %q after %s; want %d with %q", url, st, tail(body, 5), d, status, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRegistryOverTLSWithClientCertificateAndPassword: relay reaches the
// real registry — Apicurio serving HTTPS with its own (Quarkus) TLS
// settings — through a front that requires a client certificate and
// basic auth (Apicurio 3.0.9 cannot require a client certificate itself).
// At start-up, a wrong password and a missing client certificate each
// stop relay naming the variables. At run time a refused password (401)
// never quarantines a record: it waits in its tier, /readyz says why, and
// the password rotated in its file is used from the next lookup on.
func TestRegistryOverTLSWithClientCertificateAndPassword(t *testing.T) {
	o := registerOrders(t)
	upstream, err := url.Parse(registryTLSURL)
	if err != nil {
		t.Fatal(err)
	}
	var password atomic.Value
	password.Store("first")
	var refusals atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: upstream.Scheme, Host: upstream.Host})
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: stackCAs(t), MinVersion: tls.VersionTLS12}}
	front := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "relay" || p != password.Load().(string) {
			refusals.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error_code":40101,"message":"Unauthorized"}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	registry := front.URL + upstream.Path
	s := newScenario(t, 1, append(o.env(registry), "RELAY_RETRY_TIERS", "5s")...)
	pw := filepath.Join(t.TempDir(), "registry-password")
	writeSecret(t, pw, "first")
	auth := map[string]string{
		"RELAY_SCHEMA_REGISTRY_USER":                     "relay",
		"RELAY_SCHEMA_REGISTRY_PASSWORD_FILE":            pw,
		"RELAY_SCHEMA_REGISTRY_SSL_CA_LOCATION":          tlsFile("ca.pem"),
		"RELAY_SCHEMA_REGISTRY_SSL_CERTIFICATE_LOCATION": tlsFile("relay-tls.pem"),
		"RELAY_SCHEMA_REGISTRY_SSL_KEY_LOCATION":         tlsFile("relay-tls.key"),
	}
	env := merge(s.env(uniq(t, "txn")), auth)

	// Start-up: each refusal stops relay, naming what to fix.
	wrong := filepath.Join(t.TempDir(), "wrong")
	writeSecret(t, wrong, "wrong")
	code, out := runToExit(t, "wrong-password", merge(env, map[string]string{"RELAY_SCHEMA_REGISTRY_PASSWORD_FILE": wrong}), 60*time.Second)
	if code != 2 || !strings.Contains(out, "RELAY_SCHEMA_REGISTRY_USER, RELAY_SCHEMA_REGISTRY_PASSWORD_FILE") || !strings.Contains(out, "refuses relay's credential (401") {
		t.Fatalf("wrong registry password: exit %d:\n%s", code, tail(out, 8))
	}
	noCert := merge(env, map[string]string{"RELAY_SCHEMA_REGISTRY_SSL_CERTIFICATE_LOCATION": "", "RELAY_SCHEMA_REGISTRY_SSL_KEY_LOCATION": ""})
	code, out = runToExit(t, "no-client-certificate", noCert, 60*time.Second)
	if code != 2 || !strings.Contains(out, "RELAY_SCHEMA_REGISTRY_SSL_CA_LOCATION") || !strings.Contains(out, "TLS handshake with the schema registry failed") {
		t.Fatalf("no client certificate: exit %d:\n%s", code, tail(out, 8))
	}

	// Running: records pass through the authenticated registry.
	httpAddr := freeAddr(t)
	r := startRelay(t, "relay", merge(env, map[string]string{"RELAY_HTTP_ADDR": httpAddr}))
	v3 := func(id string) []byte {
		return o.value(t, 3, map[string]any{"id": id, "amount": int64(1), "currency": "EUR"})
	}
	want := produceRecs(t, s.src.topic, []rec{{key: []byte("a"), value: v3("a1"), want: "output"}, {key: []byte("b"), value: v3("b1"), want: "output"}})
	waitCaughtUp(t, s.group, s.src.topic, 1, 60*time.Second)
	waitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusOK, "ok", 30*time.Second)
	// The loop has gone round: the startup probe's endpoint passes (it
	// did not before: TestEndpoints).
	waitHTTP(t, "http://"+httpAddr+"/startupz", http.StatusOK, "ok", 5*time.Second)

	// The registry's password changes; relay's file still has the old one.
	// A record whose schema id relay has not looked up yet (version 2)
	// needs the registry: refused, it waits in its tier.
	password.Store("second")
	before := refusals.Load()
	refused := produceRecs(t, s.src.topic, []rec{{key: []byte("c"), value: o.value(t, 2, map[string]any{"id": "c1", "amount": int64(2)}), want: "output"}})
	waitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusServiceUnavailable, "schema_registry refuses relay's credential", 60*time.Second)
	if _, m := httpGet(t, "http://"+httpAddr+"/metrics"); !strings.Contains(m, `relay_dependency_credential_refused{dependency="schema_registry"} 1`) {
		t.Errorf("metrics while refused lack the refusal:\n%s", m)
	}
	r.waitLog("a dependency refuses relay's credential", 30*time.Second)
	if refusals.Load() == before {
		t.Fatal("the registry was not asked")
	}
	writeSecret(t, pw, "second") // rotated in its file: no restart
	waitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusOK, "ok", 60*time.Second)
	waitSettled(t, s, 60*time.Second)
	r.waitLog("secret file changed; read again", 10*time.Second)
	r.stop()

	// The record went to its tier for the refusal, never to quarantine,
	// and ended processed once the registry took the new password.
	assertTierHops(t, s, refused, "SCHEMA_REGISTRY_UNAUTHORIZED")
	for id, w := range refused {
		want[id] = w
	}
	assertOutcomes(t, s, want)
}

// TestRegistryWithOAuthClientCredentials: relay gets the registry's bearer
// token from an OAuth token endpoint (client credentials), the registry's
// front accepting only tokens that endpoint issued; a client secret the
// endpoint refuses stops relay at start-up naming the variables.
func TestRegistryWithOAuthClientCredentials(t *testing.T) {
	o := registerOrders(t)
	is := newIssuer(t, "relay-registry", "client-s3cret", time.Hour)
	upstream, err := url.Parse(registryURL)
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: upstream.Scheme, Host: upstream.Host})
	front := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, issued := is.tokens.Load(tok); !ok || !issued {
			refused.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	s := newScenario(t, 1, o.env(front.URL+upstream.Path)...)
	secretFile := filepath.Join(t.TempDir(), "client-secret")
	oauth := func(secret string) map[string]string {
		writeSecret(t, secretFile, secret)
		return map[string]string{
			"RELAY_SCHEMA_REGISTRY_OAUTH_TOKEN_ENDPOINT_URL": is.url(),
			"RELAY_SCHEMA_REGISTRY_OAUTH_CLIENT_ID":          "relay-registry",
			"RELAY_SCHEMA_REGISTRY_OAUTH_CLIENT_SECRET_FILE": secretFile,
			"RELAY_SCHEMA_REGISTRY_SSL_CA_LOCATION":          tlsFile("ca.pem"),
			"RELAY_SCHEMA_REGISTRY_SSL_CERTIFICATE_LOCATION": tlsFile("relay-tls.pem"),
			"RELAY_SCHEMA_REGISTRY_SSL_KEY_LOCATION":         tlsFile("relay-tls.key"),
		}
	}
	env := s.env(uniq(t, "txn"))
	code, out := runToExit(t, "wrong-client-secret", merge(env, oauth("wrong")), 60*time.Second)
	if code != 2 || !strings.Contains(out, "RELAY_SCHEMA_REGISTRY_OAUTH_CLIENT_SECRET_FILE") || !strings.Contains(out, "token endpoint answered 401") {
		t.Fatalf("wrong client secret: exit %d:\n%s", code, tail(out, 8))
	}
	r := startRelay(t, "relay", merge(env, oauth("client-s3cret")))
	v3 := func(id string) []byte {
		return o.value(t, 3, map[string]any{"id": id, "amount": int64(1), "currency": "EUR"})
	}
	want := produceRecs(t, s.src.topic, []rec{{key: []byte("a"), value: v3("a1"), want: "output"},
		{key: []byte("b"), value: o.value(t, 2, map[string]any{"id": "b1", "amount": int64(2)}), want: "output"}})
	waitSettled(t, s, 60*time.Second)
	r.stop()
	if is.issued.Load() == 0 || refused.Load() != 0 {
		t.Fatalf("tokens issued %d, requests refused %d", is.issued.Load(), refused.Load())
	}
	assertOutcomes(t, s, want)
}

// TestHookAuthentication: relay authenticates to a hook by a bearer token
// from a file, an HMAC-SHA256 signature of the timestamp and body, and a
// client certificate from a private CA, all at once; the hook verifies
// each as its documentation says. When the hook stops accepting the token
// (401), records wait in their tiers with HOOK_UNAUTHORIZED and relay is
// not ready; the token rotated in its file ends it, no record is
// quarantined, and every record is written once.
func TestHookAuthentication(t *testing.T) {
	o := registerOrders(t)
	var token atomic.Value
	token.Store("token-1")
	const signingKey = "hook-signing-key"
	var mu sync.Mutex
	bad := map[string]int{} // what the hook refused, by reason
	hook := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		refuse := func(why string, status int) {
			mu.Lock()
			bad[why]++
			mu.Unlock()
			w.WriteHeader(status)
		}
		if r.Header.Get("Authorization") != "Bearer "+token.Load().(string) {
			refuse("token", http.StatusUnauthorized)
			return
		}
		if !verifySignature(r.Header.Get("Relay-Signature"), signingKey, body, 5*time.Minute) {
			refuse("signature", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	s := newScenario(t, 1, append(o.env(registryURL), "RELAY_HOOK_URL", hook.URL, "RELAY_HOOK_TIMEOUT", "500ms", "RELAY_SCHEMA_TIMEOUT", "500ms", "RELAY_RETRY_TIERS", "5s")...)
	tokenFile := filepath.Join(t.TempDir(), "hook-token")
	writeSecret(t, tokenFile, "token-1")
	httpAddr := freeAddr(t)
	r := startRelay(t, "relay", merge(s.env(uniq(t, "txn")), map[string]string{
		"RELAY_HOOK_TOKEN_FILE":               tokenFile,
		"RELAY_HOOK_SIGNING_SECRET":           signingKey,
		"RELAY_HOOK_SSL_CA_LOCATION":          tlsFile("ca.pem"),
		"RELAY_HOOK_SSL_CERTIFICATE_LOCATION": tlsFile("relay-tls.pem"),
		"RELAY_HOOK_SSL_KEY_LOCATION":         tlsFile("relay-tls.key"),
		"RELAY_HTTP_ADDR":                     httpAddr,
	}))
	v3 := func(id string) []byte {
		return o.value(t, 3, map[string]any{"id": id, "amount": int64(1), "currency": "EUR"})
	}
	want := produceRecs(t, s.src.topic, []rec{{key: []byte("a"), value: v3("a1"), want: "output"}})
	waitCaughtUp(t, s.group, s.src.topic, 1, 60*time.Second)

	token.Store("token-2") // the hook's credential rotates first
	refused := produceRecs(t, s.src.topic, []rec{{key: []byte("b"), value: v3("b1"), want: "output"}, {key: []byte("c"), value: v3("c1"), want: "output"}})
	waitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusServiceUnavailable, "hook refuses relay's credential", 60*time.Second)
	writeSecret(t, tokenFile, "token-2")
	waitHTTP(t, "http://"+httpAddr+"/readyz", http.StatusOK, "ok", 60*time.Second)
	waitSettled(t, s, 60*time.Second)
	r.stop()
	mu.Lock()
	if bad["signature"] != 0 || bad["token"] == 0 {
		t.Errorf("hook refusals %v: want only tokens refused, during the rotation", bad)
	}
	mu.Unlock()
	assertTierHops(t, s, refused, "HOOK_UNAUTHORIZED")
	for id, w := range refused {
		want[id] = w
	}
	assertOutcomes(t, s, want)
}

// verifySignature checks Relay-Signature as the security guide tells a
// hook to: t=<unix seconds>,v1=<hex HMAC-SHA256(key, "<t>.<body>")>,
// compared in constant time, the timestamp within window.
func verifySignature(header, key string, body []byte, window time.Duration) bool {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	if d := time.Since(time.Unix(sec, 0)); d > window || d < -window {
		return false
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return hmac.Equal([]byte(hex.EncodeToString(mac.Sum(nil))), []byte(sig))
}

// assertTierHops checks that every record of ids went through a retry
// tier with code: it waited for a dependency, it did not fail.
func assertTierHops(t *testing.T, s *scenario, ids map[string]string, code string) {
	t.Helper()
	seen := map[string]bool{}
	for _, tier := range s.tiers {
		for _, m := range readCommitted(t, tier, s.partitions) {
			hs := toEnvelopeHeaders(m.Headers)
			id, _ := envelope.Lookup(hs, envelope.FailureID)
			c, _ := envelope.Lookup(hs, envelope.ErrorCode)
			if string(c) == code {
				seen[string(id)] = true
			}
		}
	}
	for id := range ids {
		if !seen[id] {
			t.Errorf("%s never waited in a tier with %s", id, code)
		}
	}
}
