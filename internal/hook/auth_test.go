package hook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"relay/internal/tiers"
)

// verify is what a hook in any language does with Relay-Signature, written
// from the documented scheme alone: HMAC-SHA256 of "<t>.<body>", hex, and
// a timestamp within the replay window.
func verify(secret, header string, body []byte, now time.Time, window time.Duration) bool {
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
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(t, 0)) > window || time.Unix(t, 0).Sub(now) > window {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(want), []byte(sig))
}

func TestTokenAndSignatureAreSentAndFollowRotation(t *testing.T) {
	var mu sync.Mutex
	var auths, sigs []string
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		sigs = append(sigs, r.Header.Get(SignatureHeader))
		bodies = append(bodies, b)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	token, key := "t1", "k1"
	c := New(srv.URL, time.Second, 1, nil, nil)
	c.Authenticate(Auth{Token: func() string { return token }, SigningSecret: func() string { return key }}, nil)
	if _, err := c.Call(context.Background(), &Request{MessageID: "o/0/1"}); err != nil {
		t.Fatal(err)
	}
	token, key = "t2", "k2" // rotated: the next call uses them
	if _, err := c.Call(context.Background(), &Request{MessageID: "o/0/2"}); err != nil {
		t.Fatal(err)
	}
	if auths[0] != "Bearer t1" || auths[1] != "Bearer t2" {
		t.Fatalf("Authorization headers %q", auths)
	}
	now := time.Now()
	if !verify("k1", sigs[0], bodies[0], now, 5*time.Minute) || !verify("k2", sigs[1], bodies[1], now, 5*time.Minute) {
		t.Fatalf("signatures %q do not verify", sigs)
	}
	if verify("k1", sigs[1], bodies[1], now, 5*time.Minute) || verify("k2", sigs[1], []byte(`{"tampered":1}`), now, 5*time.Minute) {
		t.Fatal("a signature verifies with the wrong key or body")
	}
	if verify("k2", sigs[1], bodies[1], now.Add(6*time.Minute), 5*time.Minute) {
		t.Fatal("a signature older than the window verifies: replays would pass")
	}
}

func TestRefusedCredentialIsReportedAndCleared(t *testing.T) {
	var status int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
	defer srv.Close()
	var heard []string
	c := New(srv.URL, time.Second, 1, nil, nil)
	c.Authenticate(Auth{}, func(refused bool, st int) { heard = append(heard, strconv.FormatBool(refused)+"/"+strconv.Itoa(st)) })
	for _, status = range []int{401, 403, 503, 204} {
		_, err := c.Call(context.Background(), &Request{MessageID: "o/0/1"})
		if _, code := tiers.Classify(err); (status == 401 || status == 403) && code != tiers.CodeHookUnauthorized {
			t.Errorf("%d: code %s", status, code)
		}
	}
	if got := strings.Join(heard, " "); got != "true/401 true/403 false/204" {
		t.Fatalf("heard %q; want the refusals and the acceptance, not the 503", got)
	}
}

func TestBatchRefusedIsUnauthorized(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) }))
	defer srv.Close()
	b := NewBatcher(New(srv.URL, time.Second, 2, nil, nil), 2, 2)
	_, err := b.Call(context.Background(), &Request{MessageID: "o/0/1"})
	if _, code := tiers.Classify(err); code != tiers.CodeHookUnauthorized {
		t.Fatalf("batch 401: %v", err)
	}
}

func TestClientCertificateIsPresented(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	// Without a certificate the hook refuses relay: unauthorized, not the record's fault.
	c := New(srv.URL, time.Second, 1, nil, nil)
	c.Authenticate(Auth{TLS: &tls.Config{RootCAs: roots}}, nil)
	_, err := c.Call(context.Background(), &Request{MessageID: "o/0/1"})
	if _, code := tiers.Classify(err); code != tiers.CodeHookUnauthorized {
		t.Fatalf("without a client certificate: %v", err)
	}
	cert := srv.TLS.Certificates[0] // any certificate will do for this server
	c = New(srv.URL, time.Second, 1, nil, nil)
	c.Authenticate(Auth{TLS: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}, nil)
	if _, err := c.Call(context.Background(), &Request{MessageID: "o/0/1"}); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
}

// The hook URL's query string (an API key, often) and password never
// reach an error, which goes to logs and to the failure envelope.
func TestErrorsDoNotShowTheURLsSecrets(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // refused from now on
	c := New("http://user:pa55@"+addr+"/hook?code=s3cret-key", time.Second, 1, nil, nil)
	_, err = c.Call(context.Background(), &Request{MessageID: "o/0/1"})
	if err == nil || strings.Contains(err.Error(), "s3cret-key") || strings.Contains(err.Error(), "pa55") || !strings.Contains(err.Error(), "code=%2A%2A%2A%2A") {
		t.Fatalf("error %v", err)
	}
}
