package k8s

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The console with its oauth2-proxy sidecar (the image scripts/k8s/test.sh
// builds from oauth2-proxy's module), signing people in at an OpenID
// Connect issuer (oauth2-proxy's own mockoidc, served by the test on the
// node's address), through the console's Service from the host:
//   - without a session every route of the console (GET and POST) is a
//     redirect to the issuer or a refusal, forged X-Forwarded-User or not;
//   - the sign-in (issuer, callback, session cookie) leads to the
//     console's page, which names the issuer's user by email, and a forged
//     X-Forwarded-User on a signed-in request changes nothing;
//   - the console's page port refuses connections on the pod's address
//     (only the sidecar reaches it, over the socket), its metrics port
//     serves no page;
//   - the NetworkPolicy the chart renders is accepted, selects the
//     console's pod and no relay pod, and admits its peers on the
//     sidecar's port only. The bridge plugin enforces no policy, so what
//     it refuses is not tried here.
func TestConsoleSignsInThroughTheProxy(t *testing.T) {
	c := newCluster(t)
	image := os.Getenv("RELAY_TEST_K8S_OAUTH2_PROXY_IMAGE")
	if image == "" {
		t.Fatal("RELAY_TEST_K8S_OAUTH2_PROXY_IMAGE: oauth2-proxy's image, imported into the node (make test-k8s sets it)")
	}
	d := c.deployment(t, "console", 2, 1)
	ns, values := d.ns, d.values
	ctx := context.Background()

	idp := c.issuer(t)
	cookieSecret := make([]byte, 16)
	if _, err := rand.Read(cookieSecret); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "relay-console-oauth2"}, StringData: map[string]string{
		"OAUTH2_PROXY_CLIENT_ID":     idp.ClientID,
		"OAUTH2_PROXY_CLIENT_SECRET": idp.ClientSecret,
		"OAUTH2_PROXY_COOKIE_SECRET": hex.EncodeToString(cookieSecret),
	}}
	if _, err := c.client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(image, ":")
	values["console"] = map[string]any{
		"enabled": true,
		"oauth2Proxy": map[string]any{
			"enabled":    true,
			"image":      map[string]any{"repository": repo, "tag": tag, "pullPolicy": "Never"},
			"secretName": secret.Name,
			// Plain HTTP on the test's network: the cookie without Secure.
			// The user named by email, as the chart's README advises.
			"args": []any{"--provider=oidc", "--oidc-issuer-url=" + idp.Issuer(), "--email-domain=*", "--cookie-secure=false",
				"--prefer-email-to-user=true"},
		},
	}
	c.install(t, d.cfg, ns, "relay", values)
	const consolePods = "app.kubernetes.io/instance=relay,app.kubernetes.io/component=console"
	pod := c.readyPods(t, ns, consolePods)[0]
	for _, ctr := range pod.Spec.Containers {
		if sc := ctr.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s/%s: root filesystem not read-only", pod.Name, ctr.Name)
		}
	}
	svc, err := c.client.CoreV1().Services(ns).Get(ctx, "relay-console", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "9465")

	// No session: the issuer, whatever the request claims, on every one
	// of the console's routes. (The first request waits for kube-proxy
	// to have the Service's endpoint.)
	bare := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	eventually(t, 30*time.Second, "the console's Service answers", func() bool {
		resp, err := bare.Get(base + "/ping") //nolint:noctx // the test's own Service
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	for _, route := range []string{"GET /", "GET /failures", "GET /failure?id=x", "GET /replay", "GET /replays/x",
		"GET /replays/x/events", "GET /login", "GET /static/console.css", "GET /healthz", "GET /metrics", "POST /login",
		"POST /logout", "POST /discard", "POST /replay/choose", "POST /replay/dry-run", "POST /replay/start", "POST /replays/x/stop"} {
		method, path, _ := strings.Cut(route, " ")
		for _, forged := range []string{"", "mallory"} {
			resp := request(t, bare, method, base+path, forged)
			refused := resp.status == http.StatusUnauthorized || resp.status == http.StatusForbidden ||
				resp.status == http.StatusFound && strings.HasPrefix(resp.location, idp.AuthorizationEndpoint())
			if !refused {
				t.Errorf("%s without a session (X-Forwarded-User %q): %d to %q, want a redirect to the issuer or a refusal\n%s",
					route, forged, resp.status, resp.location, resp.body)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The sign-in, as a browser follows it.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Timeout: 20 * time.Second, Jar: jar}
	user := mockoidc.DefaultUser()
	actor := `Signed in as <strong id="actor">` + user.Email + `</strong>`
	page := get(t, browser, base+"/", "")
	if page.status != http.StatusOK || !strings.Contains(page.body, actor) {
		t.Fatalf("after the sign-in: %d, want the console's page with %s\n%s", page.status, actor, page.body)
	}
	if page := get(t, browser, base+"/", "mallory"); page.status != http.StatusOK || strings.Contains(page.body, "mallory") || !strings.Contains(page.body, actor) {
		t.Fatalf("a signed-in request with a forged X-Forwarded-User: %d\n%s", page.status, page.body)
	}

	// Only the sidecar reaches the console's pages: nothing listens on
	// the pod's address at the page port (refused, not merely silent).
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(pod.Status.PodIP, "9465"), 5*time.Second)
	if err == nil {
		_ = conn.Close()
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("the console's page port on the pod's address %s: %v, want the connection refused", pod.Status.PodIP, err)
	}
	metrics := "http://" + net.JoinHostPort(pod.Status.PodIP, "9466")
	if r := get(t, bare, metrics+"/healthz", ""); r.status != http.StatusOK {
		t.Errorf("the metrics port's /healthz: %d", r.status)
	}
	if r := get(t, bare, metrics+"/", ""); r.status == http.StatusOK {
		t.Errorf("the metrics port serves a page at /:\n%s", r.body)
	}

	np, err := c.client.NetworkingV1().NetworkPolicies(ns).Get(ctx, "relay-console", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the console's NetworkPolicy: %v", err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the NetworkPolicy's selector %s misses the console's pod", sel)
	}
	for _, p := range c.readyPods(t, ns, relayPods) {
		if sel.Matches(labels.Set(p.Labels)) {
			t.Errorf("the NetworkPolicy's selector %s takes relay's pod %s too", sel, p.Name)
		}
	}
	in := np.Spec.Ingress
	if len(in) != 1 || len(in[0].From) == 0 || len(in[0].Ports) != 1 || in[0].Ports[0].Port.String() != "proxy" {
		t.Errorf("the NetworkPolicy admits %+v, want some peers on the sidecar's port only", in)
	}
	c.noRestarts(t, ns, c.readyPods(t, ns, consolePods))
}

// issuer serves an OpenID Connect provider (oauth2-proxy's mockoidc) on
// the node's address, where the sidecar reaches it; it signs in its
// default user at once.
func (c *cluster) issuer(t *testing.T) *mockoidc.MockOIDC {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(c.nodeIP(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

type response struct {
	status         int
	location, body string
}

// get asks for url as a browser would, with X-Forwarded-User set to
// forged when there is one.
func get(t *testing.T, client *http.Client, url, forged string) response {
	t.Helper()
	return request(t, client, http.MethodGet, url, forged)
}

func request(t *testing.T, client *http.Client, method, url, forged string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	if forged != "" {
		req.Header.Set("X-Forwarded-User", forged)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return response{status: resp.StatusCode, location: resp.Header.Get("Location"), body: string(b)}
}
