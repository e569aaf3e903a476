package helm_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// apiServer is a kube-apiserver on its own etcd, for this test binary.
type apiServer struct {
	url    string
	token  string
	client *http.Client
}

// resources maps the kinds the chart renders to their collections; the
// Prometheus Operator's, Strimzi's and KEDA's kinds need their CRDs,
// which this server lacks (the tests decode them strictly into local
// structs instead).
var resources = map[string]string{
	"v1 Service":                         "/api/v1/namespaces/%s/services",
	"v1 ConfigMap":                       "/api/v1/namespaces/%s/configmaps",
	"v1 ServiceAccount":                  "/api/v1/namespaces/%s/serviceaccounts",
	"v1 Pod":                             "/api/v1/namespaces/%s/pods",
	"apps/v1 StatefulSet":                "/apis/apps/v1/namespaces/%s/statefulsets",
	"policy/v1 PodDisruptionBudget":      "/apis/policy/v1/namespaces/%s/poddisruptionbudgets",
	"batch/v1 CronJob":                   "/apis/batch/v1/namespaces/%s/cronjobs",
	"batch/v1 Job":                       "/apis/batch/v1/namespaces/%s/jobs",
	"apps/v1 Deployment":                 "/apis/apps/v1/namespaces/%s/deployments",
	"networking.k8s.io/v1 Ingress":       "/apis/networking.k8s.io/v1/namespaces/%s/ingresses",
	"networking.k8s.io/v1 NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies",
}

// TestChartServerSideDryRun creates every manifest the chart renders, for
// each values file, with dryRun=All against a real kube-apiserver on a
// real etcd: the API server's own validation (strict field validation),
// defaulting and admission, in a namespace that enforces, warns and
// audits the restricted Pod Security Standard. A warning fails the test
// as an error does: the API server warns on a workload whose pods the
// namespace's profile would refuse. A privileged pod is refused in the
// same namespace, so the profile is known to be in force.
func TestChartServerSideDryRun(t *testing.T) {
	bin := os.Getenv("RELAY_KUBE_APISERVER")
	if bin == "" {
		t.Skip("RELAY_KUBE_APISERVER is not set: `make test` builds kube-apiserver (scripts/tools/kube-apiserver.sh) and names it")
	}
	s := startAPIServer(t, bin)
	ns := "relay-dry-run"
	if code, body, _ := s.do(t, "POST", "/api/v1/namespaces", "", map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns, "labels": map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted",
			"pod-security.kubernetes.io/warn":    "restricted",
			"pod-security.kubernetes.io/audit":   "restricted",
		}},
	}); code != http.StatusCreated {
		t.Fatalf("create namespace: %d %s", code, body)
	}

	// The control: the profile refuses what it must (a pod with no
	// security context: it may escalate, run as root, keep capabilities).
	plain := map[string]any{
		"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "plain"},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "x", "image": "relay"}}},
	}
	if code, body, _ := s.do(t, "POST", fmt.Sprintf(resources["v1 Pod"], ns), "dryRun=All", plain); code != http.StatusForbidden || !strings.Contains(body, "PodSecurity") {
		t.Fatalf("a pod without a security context in the restricted namespace: %d %s; want 403 PodSecurity", code, body)
	}

	for _, f := range valueFiles {
		t.Run(f, func(t *testing.T) {
			r, err := render(t, valuesFile(t, f))
			if err != nil {
				t.Fatal(err)
			}
			for _, doc := range r.docs {
				var tm metav1.TypeMeta
				var meta struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
				}
				if err := yaml.Unmarshal(doc, &tm); err != nil {
					t.Fatal(err)
				}
				_ = yaml.Unmarshal(doc, &meta)
				what := tm.Kind + " " + meta.Metadata.Name
				path, ok := resources[tm.APIVersion+" "+tm.Kind]
				if !ok {
					t.Logf("%s: %s is a CRD's kind, not checked here", what, tm.APIVersion)
					continue
				}
				var obj any
				if err := yaml.Unmarshal(doc, &obj); err != nil {
					t.Fatal(err)
				}
				code, body, warnings := s.do(t, "POST", fmt.Sprintf(path, ns), "dryRun=All&fieldValidation=Strict", obj)
				if code != http.StatusCreated && code != http.StatusOK {
					t.Errorf("%s: the API server refuses it: %d %s", what, code, body)
				}
				for _, w := range warnings {
					t.Errorf("%s: the API server warns: %s", what, w)
				}
			}
		})
	}
}

// startAPIServer starts etcd and kube-apiserver on free loopback ports,
// with a token for system:masters, and waits until the server is ready.
func startAPIServer(t *testing.T, bin string) *apiServer {
	t.Helper()
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatal("etcd is not on PATH (Debian's etcd-server; scripts/install.sh installs it)")
	}
	dir := t.TempDir()
	etcdClient, etcdPeer, apiPort := freePort(t), freePort(t), freePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	start(t, dir, "etcd", etcd, "--data-dir", filepath.Join(dir, "etcd"), "--name", "relay-test",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-cluster", fmt.Sprintf("relay-test=http://127.0.0.1:%d", etcdPeer))

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "sa.key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	token := "relay-test-" + fmt.Sprint(time.Now().UnixNano())
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, dir, "kube-apiserver", bin, "--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(apiPort), "--cert-dir", filepath.Join(dir, "certs"),
		"--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", keyFile,
		"--service-account-signing-key-file", keyFile, "--token-auth-file", tokens,
		"--authorization-mode", "RBAC", "--service-cluster-ip-range", "10.96.0.0/16",
		// No controller manager makes the namespace's default service
		// account, which this plugin would require of a pod.
		"--disable-admission-plugins", "ServiceAccount")

	s := &apiServer{
		url:   fmt.Sprintf("https://127.0.0.1:%d", apiPort),
		token: token,
		// The server's own self-signed certificate, on loopback.
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}, //nolint:gosec // a test server on loopback
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, _, _ := s.do(t, "GET", "/readyz", "", nil)
		if code == http.StatusOK {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready in 2 min; its log: %s", filepath.Join(dir, "kube-apiserver.log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// start runs a server in the background until the test ends, its output
// in dir/name.log (printed when the test fails).
func start(t *testing.T, dir, name, bin string, args ...string) {
	t.Helper()
	logFile := filepath.Join(dir, name+".log")
	log, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("--- %s log (tail) ---\n%s", name, b)
		}
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// do sends one request; it returns the status, the body and the
// Warning headers' texts. A connection error is status 0.
func (s *apiServer) do(t *testing.T, method, path, query string, body any) (int, string, []string) {
	t.Helper()
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		in = bytes.NewReader(b)
	}
	u := s.url + path
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, in)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	ct := "application/json"
	if method == http.MethodPatch {
		ct = "application/merge-patch+json"
	}
	req.Header.Set("Content-Type", ct)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Values("Warning")
}
