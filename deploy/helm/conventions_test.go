package helm_test

import (
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

// The names, labels and image the conventions of other charts set:
// nameOverride, fullnameOverride, commonLabels, global.imageRegistry and
// image.digest reach every object, and the chart's own labels stay its.
func TestChartConventions(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	v := valuesFile(t, "full.yaml")
	v["fullnameOverride"] = "orders-relay"
	v["nameOverride"] = "ingress"
	v["commonLabels"] = map[string]any{"team": "payments"}
	v["commonAnnotations"] = map[string]any{"owner": "payments-sre"}
	v["service"] = map[string]any{"annotations": map[string]any{"owner": "the-service", "prometheus.io/scrape": "true"}}
	v["global"] = map[string]any{"imageRegistry": "mirror.internal:5000/"}
	v["image"].(map[string]any)["digest"] = digest
	v["relay"].(map[string]any)["env"] = map[string]any{"OTEL_SERVICE_NAME": "orders-relay"}
	delete(v, "affinity")
	restricted := map[string]any{"allowPrivilegeEscalation": false, "runAsNonRoot": true, "capabilities": map[string]any{"drop": []any{"ALL"}},
		"seccompProfile": map[string]any{"type": "RuntimeDefault"}}
	v["extraVolumes"] = []any{map[string]any{"name": "ca", "configMap": map[string]any{"name": "trust-bundle"}}}
	v["extraVolumeMounts"] = []any{map[string]any{"name": "ca", "mountPath": "/etc/ssl/extra", "readOnly": true}}
	v["initContainers"] = []any{map[string]any{"name": "wait", "image": "busybox:1", "command": []any{"true"}, "securityContext": restricted}}
	v["sidecars"] = []any{map[string]any{"name": "shipper", "image": "shipper:1", "securityContext": restricted}}
	r, err := render(t, v)
	if err != nil {
		t.Fatal(err)
	}
	s := r.statefulSet
	if s.Name != "orders-relay" || s.Labels["team"] != "payments" || s.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "ingress" {
		t.Fatalf("StatefulSet %s, labels %v, selector %v", s.Name, s.Labels, s.Spec.Selector.MatchLabels)
	}
	if img := s.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, "mirror.internal:5000/") || strings.Contains(img, "//") || !strings.HasSuffix(img, "@"+digest) {
		t.Errorf("image %q", img)
	}
	assertRestricted(t, "with init containers and sidecars", &s.Spec.Template)
	pod := s.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || len(pod.Containers) != 2 || pod.Containers[1].Name != "shipper" ||
		pod.Volumes[len(pod.Volumes)-1].Name != "ca" || pod.Containers[0].VolumeMounts[len(pod.Containers[0].VolumeMounts)-1].MountPath != "/etc/ssl/extra" {
		t.Errorf("extra volumes, mounts, init containers and sidecars: %+v", pod)
	}
	otel := false
	for _, e := range s.Spec.Template.Spec.Containers[0].Env {
		otel = otel || (e.Name == "OTEL_SERVICE_NAME" && e.Value == "orders-relay")
	}
	if !otel {
		t.Error("OTEL_SERVICE_NAME from relay.env is not in the pod's environment")
	}
	if a := s.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 2 ||
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector.MatchLabels["app.kubernetes.io/name"] != "ingress" {
		t.Errorf("default affinity: %+v", a)
	}
	for _, c := range r.cronJobs {
		if img := c.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, "mirror.internal:5000/") || !strings.HasSuffix(img, "@"+digest) {
			t.Errorf("audit image %q", img)
		}
		if c.Labels["team"] != "payments" {
			t.Errorf("CronJob labels %v", c.Labels)
		}
	}
	if s.Annotations["owner"] != "payments-sre" {
		t.Errorf("StatefulSet annotations %v", s.Annotations)
	}
	for _, svc := range r.services {
		if svc.Labels["team"] != "payments" || !strings.HasPrefix(svc.Name, "orders-relay") {
			t.Errorf("Service %s labels %v", svc.Name, svc.Labels)
		}
		if svc.Name == "orders-relay" && (svc.Annotations["owner"] != "the-service" || svc.Annotations["prometheus.io/scrape"] != "true") {
			t.Errorf("the Service's own annotations must win: %v", svc.Annotations)
		}
	}
	for _, sa := range r.serviceAccounts {
		if sa.Annotations["owner"] != "payments-sre" {
			t.Errorf("ServiceAccount %s annotations %v", sa.Name, sa.Annotations)
		}
	}
	for name, edit := range map[string]func(v map[string]any){
		"a chart label in commonLabels": func(v map[string]any) {
			v["commonLabels"] = map[string]any{"app.kubernetes.io/name": "x"}
		},
		"a digest that is not sha256": func(v map[string]any) { v["image"] = map[string]any{"repository": "relay", "digest": "latest"} },
	} {
		v := valuesFile(t, "minimal.yaml")
		edit(v)
		if _, err := render(t, v); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// OpenShift's restricted-v2 assigns the pods' user: with the chart's
// OpenShift values no pod names one, and each still passes the restricted
// profile; without them, relay's image user stays.
func TestChartOnOpenShift(t *testing.T) {
	plain, err := render(t, valuesFile(t, "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if sc := plain.statefulSet.Spec.Template.Spec.SecurityContext; sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
		t.Fatalf("default pod security context %+v", sc)
	}
	v := valuesFile(t, "full.yaml")
	openshift, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "values-openshift.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	v["global"] = openshift["global"]
	r, err := render(t, v)
	if err != nil {
		t.Fatal(err)
	}
	for what, p := range r.podTemplates() {
		if sc := p.Spec.SecurityContext; sc.RunAsUser != nil || sc.RunAsGroup != nil || sc.FSGroup != nil {
			t.Errorf("%s names its user or groups on OpenShift: %+v", what, sc)
		}
		assertRestricted(t, what+" on OpenShift", p)
	}
}
