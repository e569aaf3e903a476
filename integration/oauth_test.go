package integration

import (
	"crypto"
	cryptorand "crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// issuer is a small OAuth 2.0 token endpoint (client credentials grant)
// issuing RS256 JWTs signed with the stack's test key, whose JWKS the
// broker validates tokens with (scripts/stack/kafka.sh): iss
// relay-test-issuer, aud relay-test-kafka, sub the client id.
type issuer struct {
	srv      *httptest.Server
	key      *rsa.PrivateKey
	clientID string
	secret   atomic.Value
	ttl      atomic.Int64 // token lifetime in seconds; negative: already expired
	issued   atomic.Int64
	refused  atomic.Int64
	audience atomic.Value // the aud claim
	tokens   sync.Map     // every token issued
}

func newIssuer(t *testing.T, clientID, secret string, ttl time.Duration) *issuer {
	t.Helper()
	b, err := os.ReadFile(tlsFile("oauth.key"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("oauth.key holds no PEM block")
	}
	var key *rsa.PrivateKey
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		key, _ = k.(*rsa.PrivateKey)
	} else if key, err = x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key, clientID: clientID}
	is.secret.Store(secret)
	is.ttl.Store(int64(ttl / time.Second))
	is.audience.Store("relay-test-kafka")
	is.srv = httptest.NewServer(http.HandlerFunc(is.token))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) url() string { return is.srv.URL + "/token" }

// token answers the client credentials grant, the client authenticated
// by HTTP basic auth (as librdkafka sends it) or in the form.
func (is *issuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "client_credentials" {
		http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.Form.Get("client_id"), r.Form.Get("client_secret")
	}
	if id != is.clientID || secret != is.secret.Load().(string) {
		is.refused.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
		return
	}
	now := time.Now()
	ttl := is.ttl.Load()
	jwt := is.sign(map[string]any{"iss": "relay-test-issuer", "aud": is.audience.Load(), "sub": id,
		"iat": now.Unix() - 60, "exp": now.Unix() + ttl, "scope": "kafka"})
	is.issued.Add(1)
	is.tokens.Store(jwt, true)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": jwt, "token_type": "Bearer", "expires_in": max(ttl, 1)})
}

func (is *issuer) sign(claims map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signed := enc(map[string]string{"alg": "RS256", "typ": "JWT", "kid": "relay-test"}) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(nil, is.key, crypto.SHA256, sum[:])
	if err != nil {
		panic(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// oidcEnv connects relay to the SASL_SSL listener with OAUTHBEARER, its
// tokens from is by the client credentials grant, the client secret read
// from a file.
func oidcEnv(t *testing.T, is *issuer, secret string) map[string]string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "client-secret")
	writeSecret(t, f, secret)
	return map[string]string{
		"RELAY_KAFKA_BOOTSTRAP_SERVERS":                   saslBootstrap,
		"RELAY_KAFKA_SECURITY_PROTOCOL":                   "SASL_SSL",
		"RELAY_KAFKA_SASL_MECHANISM":                      "OAUTHBEARER",
		"RELAY_KAFKA_SASL_OAUTHBEARER_METHOD":             "oidc",
		"RELAY_KAFKA_SASL_OAUTHBEARER_CLIENT_ID":          is.clientID,
		"RELAY_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET_FILE": f,
		"RELAY_KAFKA_SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL": is.url(),
		"RELAY_KAFKA_SASL_OAUTHBEARER_SCOPE":              "kafka",
		"RELAY_KAFKA_SSL_CA_LOCATION":                     tlsFile("ca.pem"),
	}
}

// TestOIDCClientCredentialsWithTokenRefresh: relay authenticates with
// OAUTHBEARER tokens it gets from an OIDC token endpoint (client
// credentials), the broker validating them against the issuer's JWKS, and
// runs past several token lifetimes: librdkafka refreshes the token, the
// broker makes the connections authenticate again with it (every 10 s),
// and every record is relayed exactly once.
func TestOIDCClientCredentialsWithTokenRefresh(t *testing.T) {
	s := newScenario(t, 2)
	client := "relay-oidc-" + randomHex(t, 3)
	is := newIssuer(t, client, "client-s3cret", 12*time.Second)
	env := s.env("relay-" + client)
	grant(t, "User:"+client, requiredACLs(t, env, "run")...)
	r := startRelay(t, "relay", merge(env, oidcEnv(t, is, "client-s3cret")))
	bg := s.src.produceInBackground(t, 40, 20, time.Second)
	bg.Wait()
	waitCaughtUp(t, s.group, s.src.topic, s.partitions, 90*time.Second)
	if n := is.issued.Load(); n < 3 {
		t.Errorf("the issuer issued %d tokens over 40 s of 12 s tokens; want refreshes", n)
	}
	out := r.stderr.String()
	if strings.Contains(out, "client-s3cret") {
		t.Error("the log shows the client secret")
	}
	r.stop()
	assertExactlyOnce(t, s.src, s.output, s.group, s.partitions)
}

// A token librdkafka refuses (expired when issued), tokens the broker
// refuses (issued for another audience, or signed by a key not in the
// issuer's JWKS), or a client secret the issuer refuses, each stops relay
// at start-up naming the variables.
func TestOIDCRefusalsStopRelayNamingTheVariables(t *testing.T) {
	s := newScenario(t, 1)
	client := "relay-oidc-" + randomHex(t, 3)
	env := s.env("relay-" + client)
	grant(t, "User:"+client, requiredACLs(t, env, "run")...)

	var err error
	expired := newIssuer(t, client, "right", -120*time.Second)
	code, out := runToExit(t, "expired-token", merge(env, oidcEnv(t, expired, "right")), 90*time.Second)
	if code != 2 || !strings.Contains(out, "RELAY_KAFKA_SASL_OAUTHBEARER_CLIENT_ID") {
		t.Fatalf("expired token: exit %d:\n%s", code, tail(out, 8))
	}
	other := newIssuer(t, client, "right", time.Minute)
	other.audience.Store("another-service") // the broker checks the audience
	code, out = runToExit(t, "wrong-audience", merge(env, oidcEnv(t, other, "right")), 90*time.Second)
	if code != 2 || !strings.Contains(out, "RELAY_KAFKA_SASL_OAUTHBEARER_CLIENT_ID") || other.issued.Load() == 0 {
		t.Fatalf("a token for another audience: exit %d:\n%s", code, tail(out, 8))
	}
	forged := newIssuer(t, client, "right", time.Minute)
	if forged.key, err = rsa.GenerateKey(cryptorand.Reader, 2048); err != nil { // not the key of the broker's JWKS
		t.Fatal(err)
	}
	code, out = runToExit(t, "forged-token", merge(env, oidcEnv(t, forged, "right")), 90*time.Second)
	if code != 2 || !strings.Contains(out, "invalid_token") {
		t.Fatalf("a token signed by another key: exit %d:\n%s", code, tail(out, 8))
	}
	is := newIssuer(t, client, "right", time.Minute)
	code, out = runToExit(t, "wrong-secret", merge(env, oidcEnv(t, is, "wrong")), 90*time.Second)
	if code != 2 || !strings.Contains(out, "RELAY_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET_FILE") || is.refused.Load() == 0 {
		t.Fatalf("wrong client secret: exit %d, %d refused:\n%s", code, is.refused.Load(), tail(out, 8))
	}
}
