package helm_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// selects reports whether sel (a label selector) takes a pod with lbls.
func selects(t *testing.T, sel *metav1.LabelSelector, lbls map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(labels.Set(lbls))
}

// `helm test`: a pod that probes /readyz of every instance through the
// headless Service's per-pod names on the served port, then audits the
// last window; it is no instance of relay's (neither the Service, the
// PodDisruptionBudget nor the StatefulSet takes it), and relay's
// NetworkPolicy lets it reach the port.
func TestChartHelmTest(t *testing.T) {
	for _, c := range []struct {
		file, source string
		replicas     int
		audit        bool
	}{
		{"minimal.yaml", "orders", 2, true},
		{"full.yaml", "orders", 6, true},
		{"strimzi.yaml", "orders", 3, true},
		{"keda.yaml", "", 2, false}, // KEDA: its minReplicaCount, always there
	} {
		t.Run(c.file, func(t *testing.T) {
			r, err := render(t, valuesFile(t, c.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.pods) != 1 {
				t.Fatalf("%d pods, want the helm test's", len(r.pods))
			}
			p := r.pods[0]
			if p.Annotations["helm.sh/hook"] != "test" || p.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("the test pod: annotations %v, restart policy %q", p.Annotations, p.Spec.RestartPolicy)
			}
			// The instances' addresses: <pod>.<governing Service>.<namespace>.svc.
			var svc *corev1.Service
			for i := range r.services {
				if r.services[i].Name == r.statefulSet.Spec.ServiceName {
					svc = &r.services[i]
				}
			}
			if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Fatalf("the StatefulSet's serviceName %q is no headless Service", r.statefulSet.Spec.ServiceName)
			}
			port := r.statefulSet.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort
			want := []string{"/usr/local/bin/relay", "probe", "--timeout=10s"}
			for i := range c.replicas {
				want = append(want, fmt.Sprintf("http://%s-%d.%s.kafka.svc:%d/readyz", r.statefulSet.Name, i, svc.Name, port))
			}
			if len(p.Spec.InitContainers) != 1 || !slices.Equal(p.Spec.InitContainers[0].Command, want) {
				t.Errorf("the probe runs %v, want %v", p.Spec.InitContainers, want)
			}
			audit := p.Spec.Containers[0]
			args := strings.Join(append(slices.Clone(audit.Command), audit.Args...), " ")
			if c.audit && (audit.Name != "audit" || !strings.Contains(args, "relay audit --source="+c.source+" --from=10m --progress=none")) {
				t.Errorf("the test's audit runs %q", args)
			}
			if !c.audit && (audit.Name != "done" || len(p.Spec.Containers) != 1) {
				t.Errorf("tests.audit.enabled false, and the pod runs %v", p.Spec.Containers)
			}
			if p.Spec.ServiceAccountName != r.statefulSet.Spec.Template.Spec.ServiceAccountName || p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken {
				t.Errorf("the test pod runs as %q (token %v)", p.Spec.ServiceAccountName, p.Spec.AutomountServiceAccountToken)
			}
			// No instance of relay's.
			if selects(t, r.statefulSet.Spec.Selector, p.Labels) || selects(t, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, p.Labels) {
				t.Errorf("the test pod's labels %v are taken for an instance's", p.Labels)
			}
			for _, pdb := range r.pdbs {
				if selects(t, pdb.Spec.Selector, p.Labels) {
					t.Errorf("the PodDisruptionBudget counts the test pod")
				}
			}
			// relay's NetworkPolicy (on in full and strimzi) admits it.
			for _, np := range r.netpols {
				if !selects(t, &np.Spec.PodSelector, r.statefulSet.Spec.Template.Labels) {
					continue // the console's
				}
				if !admits(t, np, p.Labels, port) {
					t.Errorf("relay's NetworkPolicy refuses the test pod on port %d: %+v", port, np.Spec.Ingress)
				}
			}
		})
	}
	v := valuesFile(t, "minimal.yaml")
	v["tests"] = map[string]any{"enabled": false}
	if r, err := render(t, v); err != nil || len(r.pods) != 0 {
		t.Errorf("tests.enabled false: %v, pods %d", err, len(r.pods))
	}
}

// admits reports whether np lets a pod of its namespace with lbls reach
// port (by number, or by the name http, relay's).
func admits(t *testing.T, np networkingv1.NetworkPolicy, lbls map[string]string, port int32) bool {
	t.Helper()
	for _, rule := range np.Spec.Ingress {
		portOK := len(rule.Ports) == 0
		for _, p := range rule.Ports {
			portOK = portOK || p.Port == nil || p.Port.StrVal == "http" || p.Port.IntVal == port
		}
		for _, from := range rule.From {
			if portOK && from.NamespaceSelector == nil && from.PodSelector != nil && selects(t, from.PodSelector, lbls) {
				return true
			}
		}
	}
	return false
}

// The topics Job: `relay topics apply` before the install and each
// upgrade, self-contained, for a pre-install hook runs before the
// release's own objects exist: it refers to none of them (not the
// daemon's ServiceAccount, not the rules' ConfigMap), only to hooks
// created before it and to what exists before the chart.
func TestChartTopicsJob(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(v map[string]any)
		sa   string
	}{
		{"its own account", func(map[string]any) {}, "relay-topics"},
		{"inline rules", func(v map[string]any) { v["relay"].(map[string]any)["rules"] = map[string]any{"inline": "rules: []"} }, "relay-topics"},
		{"an existing account", func(v map[string]any) { v["serviceAccount"] = map[string]any{"create": false, "name": "relay-irsa"} }, "relay-irsa"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := valuesFile(t, "keda.yaml")
			c.edit(v)
			r, err := render(t, v)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.jobs) != 1 {
				t.Fatalf("%d Jobs, want the topics Job", len(r.jobs))
			}
			j := r.jobs[0]
			if j.Annotations["helm.sh/hook"] != "pre-install,pre-upgrade" || j.Annotations["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" {
				t.Errorf("the Job's annotations %v", j.Annotations)
			}
			pod := j.Spec.Template.Spec
			ctr := pod.Containers[0]
			if got := strings.Join(append(slices.Clone(ctr.Command), ctr.Args...), " "); got != "/usr/local/bin/relay topics apply --replication-factor=1" {
				t.Errorf("the Job runs %q", got)
			}
			if pod.RestartPolicy != corev1.RestartPolicyNever || j.Spec.BackoffLimit == nil || j.Spec.ActiveDeadlineSeconds == nil {
				t.Errorf("restart policy %q, backoff limit %v, deadline %v", pod.RestartPolicy, j.Spec.BackoffLimit, j.Spec.ActiveDeadlineSeconds)
			}
			// What the release creates as ordinary objects, which a
			// pre-install hook cannot use.
			release := map[string]bool{}
			for _, o := range r.configMaps {
				release["ConfigMap/"+o.Name] = true
			}
			for _, o := range r.serviceAccounts {
				if o.Annotations["helm.sh/hook"] == "" {
					release["ServiceAccount/"+o.Name] = true
					continue
				}
				w, _ := strconv.Atoi(o.Annotations["helm.sh/hook-weight"])
				jw, _ := strconv.Atoi(j.Annotations["helm.sh/hook-weight"])
				if o.Annotations["helm.sh/hook"] != j.Annotations["helm.sh/hook"] || w >= jw {
					t.Errorf("hook ServiceAccount %s: annotations %v, not created before the Job", o.Name, o.Annotations)
				}
				if o.Annotations["eks.amazonaws.com/role-arn"] == "" || o.AutomountServiceAccountToken == nil || *o.AutomountServiceAccountToken {
					t.Errorf("hook ServiceAccount %s: the daemon's identity annotations and no token, got %v", o.Name, o.Annotations)
				}
			}
			if pod.ServiceAccountName != c.sa || release["ServiceAccount/"+pod.ServiceAccountName] {
				t.Errorf("the Job runs as %q, want %q, not a release object", pod.ServiceAccountName, c.sa)
			}
			for _, vol := range pod.Volumes {
				if vol.ConfigMap != nil && release["ConfigMap/"+vol.ConfigMap.Name] {
					t.Errorf("the Job mounts the release's ConfigMap %s", vol.ConfigMap.Name)
				}
			}
			for _, e := range ctr.Env {
				if e.Name == "RELAY_RULES_FILE" {
					t.Errorf("the Job has RELAY_RULES_FILE=%s", e.Value)
				}
			}
			if selects(t, r.statefulSet.Spec.Selector, j.Spec.Template.Labels) {
				t.Errorf("the Job's pod labels %v are taken for an instance's", j.Spec.Template.Labels)
			}
		})
	}
}
