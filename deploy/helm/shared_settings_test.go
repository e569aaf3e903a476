package helm_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// TestChartRefusesARollingChangeOfSharedSettings: with the release's
// StatefulSet running pods in a real kube-apiserver, an upgrade that
// changes RELAY_RETRY_TIERS or RELAY_ORDERING fails, naming both values
// and the procedure; the same values, other changes (the image), the
// scale to 0, and the change once the StatefulSet is at 0, pass.
func TestChartRefusesARollingChangeOfSharedSettings(t *testing.T) {
	const ns = "kafka"
	s, cfg := apiServerWith(t, ns)
	vals := func(replicas int, env map[string]any) map[string]any {
		v := valuesFile(t, "minimal.yaml")
		v["replicas"] = replicas
		relay, _ := v["relay"].(map[string]any)
		if relay == nil {
			relay = map[string]any{}
			v["relay"] = relay
		}
		relay["env"] = env
		return v
	}
	upgrade := func(v map[string]any) (map[string]string, error) {
		c := loadChart(t)
		values, err := chartutil.ToRenderValues(c, v, chartutil.ReleaseOptions{Name: "relay", Namespace: ns, IsUpgrade: true}, chartutil.DefaultCapabilities.Copy())
		if err != nil {
			t.Fatal(err)
		}
		return engine.New(cfg).Render(c, values)
	}
	running := map[string]any{"RELAY_RETRY_TIERS": "30s,5m", "RELAY_ORDERING": "key"}
	files, err := upgrade(vals(3, running))
	if err != nil {
		t.Fatalf("first install: %v", err)
	}
	var sts map[string]any
	for name, doc := range files {
		if strings.HasSuffix(name, "statefulset.yaml") {
			if err := yaml.Unmarshal([]byte(doc), &sts); err != nil {
				t.Fatal(err)
			}
		}
	}
	if code, body, _ := s.do(t, "POST", fmt.Sprintf(resources["apps/v1 StatefulSet"], ns), "", sts); code != http.StatusCreated {
		t.Fatalf("create the StatefulSet: %d %s", code, body)
	}

	for _, tc := range []struct {
		name     string
		replicas int
		env      map[string]any
		refused  string
	}{
		{"same values", 3, running, ""},
		{"other variables", 5, map[string]any{"RELAY_RETRY_TIERS": "30s,5m", "RELAY_ORDERING": "key", "RELAY_HOOK_URL": "http://hook"}, ""},
		{"scale to 0", 0, running, ""},
		{"tiers", 3, map[string]any{"RELAY_RETRY_TIERS": "30s,10m", "RELAY_ORDERING": "key"}, "RELAY_RETRY_TIERS=30s,10m"},
		{"ordering", 3, map[string]any{"RELAY_RETRY_TIERS": "30s,5m", "RELAY_ORDERING": "partition"}, "RELAY_ORDERING=partition"},
		{"tier template", 3, map[string]any{"RELAY_RETRY_TIERS": "30s,5m", "RELAY_ORDERING": "key", "RELAY_RETRY_TOPIC": "{source}.r.{delay}"}, "RELAY_RETRY_TOPIC={source}.r.{delay}"},
	} {
		_, err := upgrade(vals(tc.replicas, tc.env))
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refused != "" && err == nil:
			t.Errorf("%s: not refused with 3 pods running", tc.name)
		case tc.refused != "":
			for _, want := range []string{tc.refused, "RELAY_RETRY_TIERS=30s,5m", "while 3 pods", "Scale to 0 first"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: the refusal lacks %q: %v", tc.name, want, err)
				}
			}
		}
	}

	// A StatefulSet of an older chart carries no annotation: its relay
	// container's environment says what runs.
	if code, body, _ := s.do(t, "PATCH", fmt.Sprintf(resources["apps/v1 StatefulSet"], ns)+"/relay", "",
		map[string]any{"metadata": map[string]any{"annotations": map[string]any{"relay/shared-settings": nil}}}); code != http.StatusOK {
		t.Fatalf("remove the annotation: %d %s", code, body)
	}
	if _, err := upgrade(vals(3, running)); err != nil {
		t.Errorf("same values over an older chart's StatefulSet: refused: %v", err)
	}
	if _, err := upgrade(vals(3, map[string]any{"RELAY_RETRY_TIERS": "30s,10m", "RELAY_ORDERING": "key"})); err == nil || !strings.Contains(err.Error(), "RELAY_RETRY_TIERS=30s,5m") {
		t.Errorf("other tiers over an older chart's StatefulSet: %v, want refused", err)
	}

	// Scaled to 0 (and no pod left): the change goes through.
	if code, body, _ := s.do(t, "PATCH", fmt.Sprintf(resources["apps/v1 StatefulSet"], ns)+"/relay", "", map[string]any{"spec": map[string]any{"replicas": 0}}); code != http.StatusOK {
		t.Fatalf("scale to 0: %d %s", code, body)
	}
	if _, err := upgrade(vals(3, map[string]any{"RELAY_RETRY_TIERS": "30s,10m", "RELAY_ORDERING": "key"})); err != nil {
		t.Fatalf("the change at 0 replicas: %v", err)
	}
}

// Pentest finding: the oauth2-proxy guard read the sidecar's args only;
// its Secret (envFrom) could set OAUTH2_PROXY_SKIP_AUTH_ROUTES or
// OAUTH2_PROXY_TRUSTED_IPS and let requests past the sign-in. Against a
// real kube-apiserver, a Secret setting one is refused, naming it; the
// Secret of the documented three keys passes.
func TestChartRefusesAProxySecretThatSkipsTheSignIn(t *testing.T) {
	const ns = "kafka"
	s, cfg := apiServerWith(t, ns)
	secret := func(name string, keys ...string) {
		data := map[string]any{}
		for _, k := range keys {
			data[k] = "eA==" // "x"
		}
		if code, body, _ := s.do(t, "POST", "/api/v1/namespaces/"+ns+"/secrets", "", map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": name}, "data": data}); code != http.StatusCreated {
			t.Fatalf("create secret %s: %d %s", name, code, body)
		}
	}
	documented := []string{"OAUTH2_PROXY_CLIENT_ID", "OAUTH2_PROXY_CLIENT_SECRET", "OAUTH2_PROXY_COOKIE_SECRET"}
	secret("good", documented...)
	secret("skips", append(documented, "OAUTH2_PROXY_SKIP_AUTH_ROUTES")...)
	secret("trusts", append(documented, "OAUTH2_PROXY_TRUSTED_IPS")...)
	for name, refused := range map[string]string{"good": "", "skips": "OAUTH2_PROXY_SKIP_AUTH_ROUTES", "trusts": "OAUTH2_PROXY_TRUSTED_IPS"} {
		v := valuesFile(t, "minimal.yaml")
		v["console"] = map[string]any{"enabled": true, "oauth2Proxy": map[string]any{"enabled": true, "secretName": name,
			"image": map[string]any{"repository": "r", "tag": "t"}, "args": []any{"--provider=oidc"}}}
		c := loadChart(t)
		values, err := chartutil.ToRenderValues(c, v, chartutil.ReleaseOptions{Name: "relay", Namespace: ns, IsInstall: true}, chartutil.DefaultCapabilities.Copy())
		if err != nil {
			t.Fatal(err)
		}
		_, err = engine.New(cfg).Render(c, values)
		switch {
		case refused == "" && err != nil:
			t.Errorf("Secret %s (the documented keys): %v", name, err)
		case refused != "" && (err == nil || !strings.Contains(err.Error(), refused)):
			t.Errorf("Secret %s: %v; want a refusal naming %s", name, err, refused)
		}
	}
}

// apiServerWith starts a real kube-apiserver (skipping the test without
// RELAY_KUBE_APISERVER) with namespace ns, and a client config for it.
func apiServerWith(t *testing.T, ns string) (*apiServer, *rest.Config) {
	t.Helper()
	bin := os.Getenv("RELAY_KUBE_APISERVER")
	if bin == "" {
		t.Skip("RELAY_KUBE_APISERVER is not set: `make test` builds kube-apiserver (scripts/tools/kube-apiserver.sh) and names it")
	}
	s := startAPIServer(t, bin)
	if code, body, _ := s.do(t, "POST", "/api/v1/namespaces", "", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}); code != http.StatusCreated {
		t.Fatalf("create namespace: %d %s", code, body)
	}
	return s, &rest.Config{Host: s.url, BearerToken: s.token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}
