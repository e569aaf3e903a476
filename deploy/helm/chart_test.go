// Package helm_test checks relay's Helm chart (deploy/helm/relay) the way a
// cluster would take it, without a cluster: helm lint, a render through
// Helm's Go SDK for each values file in testdata, every manifest decoded
// strictly into the official Kubernetes types, the pods evaluated against
// the Pod Security Standards' restricted profile, relay's own
// configuration loaded from the rendered environment, and the chart's
// promises about relay (a stable transactional id, a grace period above
// the shutdown bound, probes on the served port).
package helm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	"relay/internal/config"
)

const chartDir = "relay"

// rendered is one render of the chart: its objects by kind.
type rendered struct {
	statefulSet     *appsv1.StatefulSet
	services        []corev1.Service
	configMaps      []corev1.ConfigMap
	serviceAccounts []corev1.ServiceAccount
	pdbs            []policyv1.PodDisruptionBudget
	cronJobs        []batchv1.CronJob
	deployments     []appsv1.Deployment
	ingresses       []networkingv1.Ingress
	netpols         []networkingv1.NetworkPolicy
	pods            []corev1.Pod // the helm test's
	jobs            []batchv1.Job
	// The Prometheus Operator's, Strimzi's and KEDA's kinds (CRDs,
	// outside k8s.io/api), in local structs of the fields the chart sets.
	monitors      []monitor
	rules         []prometheusRule
	kafkaTopics   []kafkaTopic
	kafkaUsers    []kafkaUser
	scaledObjects []scaledObject
	// docs are the manifests as rendered, for the server-side dry run.
	docs [][]byte
}

// monitor is a ServiceMonitor or PodMonitor, in the fields the chart sets.
type monitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		NamespaceSelector *struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector,omitempty"`
		Selector            metav1.LabelSelector `json:"selector"`
		Endpoints           []endpoint           `json:"endpoints,omitempty"`
		PodMetricsEndpoints []endpoint           `json:"podMetricsEndpoints,omitempty"`
	} `json:"spec"`
}

type endpoint struct {
	Port              string           `json:"port"`
	Path              string           `json:"path"`
	Interval          string           `json:"interval"`
	ScrapeTimeout     string           `json:"scrapeTimeout,omitempty"`
	Relabelings       []map[string]any `json:"relabelings,omitempty"`
	MetricRelabelings []map[string]any `json:"metricRelabelings,omitempty"`
}

type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Groups []map[string]any `json:"groups"`
	} `json:"spec"`
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func valuesFile(t *testing.T, name string) map[string]any {
	t.Helper()
	v, err := chartutil.ReadValuesFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// render renders the chart with vals as `helm install relay` would in
// namespace kafka, values.schema.json enforced.
func render(t *testing.T, vals map[string]any) (*rendered, error) {
	t.Helper()
	c := loadChart(t)
	caps := chartutil.DefaultCapabilities.Copy()
	values, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: "relay", Namespace: "kafka", IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(c, values)
	if err != nil {
		return nil, err
	}
	out := &rendered{}
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue // _helpers.tpl, NOTES.txt
		}
		for i, doc := range strings.Split(files[name], "\n---") {
			if strings.TrimSpace(doc) == "" || isComments(doc) {
				continue
			}
			out.docs = append(out.docs, []byte(doc))
			if err := out.add([]byte(doc)); err != nil {
				t.Fatalf("%s, document %d: %v\n%s", name, i, err, doc)
			}
		}
	}
	if out.statefulSet == nil {
		t.Fatal("no StatefulSet rendered")
	}
	return out, nil
}

func isComments(doc string) bool {
	for _, l := range strings.Split(doc, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// add decodes one manifest strictly (an unknown or duplicate field is an
// error) into its official type.
func (r *rendered) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	strict := func(v any) error { return yaml.UnmarshalStrict(doc, v) }
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 StatefulSet":
		if r.statefulSet != nil {
			return fmt.Errorf("a second StatefulSet")
		}
		r.statefulSet = &appsv1.StatefulSet{}
		return strict(r.statefulSet)
	case "v1 Service":
		return appendStrict(&r.services, strict)
	case "v1 ConfigMap":
		return appendStrict(&r.configMaps, strict)
	case "v1 ServiceAccount":
		return appendStrict(&r.serviceAccounts, strict)
	case "policy/v1 PodDisruptionBudget":
		return appendStrict(&r.pdbs, strict)
	case "batch/v1 CronJob":
		return appendStrict(&r.cronJobs, strict)
	case "apps/v1 Deployment":
		return appendStrict(&r.deployments, strict)
	case "networking.k8s.io/v1 Ingress":
		return appendStrict(&r.ingresses, strict)
	case "networking.k8s.io/v1 NetworkPolicy":
		return appendStrict(&r.netpols, strict)
	case "monitoring.coreos.com/v1 ServiceMonitor", "monitoring.coreos.com/v1 PodMonitor":
		return appendStrict(&r.monitors, strict)
	case "monitoring.coreos.com/v1 PrometheusRule":
		return appendStrict(&r.rules, strict)
	case "v1 Pod":
		return appendStrict(&r.pods, strict)
	case "batch/v1 Job":
		return appendStrict(&r.jobs, strict)
	case "kafka.strimzi.io/v1 KafkaTopic", "kafka.strimzi.io/v1beta2 KafkaTopic":
		return appendStrict(&r.kafkaTopics, strict)
	case "kafka.strimzi.io/v1 KafkaUser", "kafka.strimzi.io/v1beta2 KafkaUser":
		return appendStrict(&r.kafkaUsers, strict)
	case "keda.sh/v1alpha1 ScaledObject":
		return appendStrict(&r.scaledObjects, strict)
	default:
		return fmt.Errorf("unexpected kind %s %s", tm.APIVersion, tm.Kind)
	}
}

func appendStrict[T any](list *[]T, strict func(any) error) error {
	var v T
	if err := strict(&v); err != nil {
		return err
	}
	*list = append(*list, v)
	return nil
}

var valueFiles = []string{"minimal.yaml", "full.yaml", "existing-rules.yaml", "strimzi.yaml", "keda.yaml"}

// helm lint, as `helm lint deploy/helm/relay -f testdata/<file>`: no error
// and no warning.
func TestChartLints(t *testing.T) {
	for _, f := range valueFiles {
		t.Run(f, func(t *testing.T) {
			l := lint.All(chartDir, valuesFile(t, f), "kafka", false)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("%s", m)
				}
			}
		})
	}
}

// Every values file renders into manifests the API types take strictly,
// pods the restricted profile admits, and an environment relay's own
// configuration loads.
func TestChartRenders(t *testing.T) {
	for _, f := range valueFiles {
		t.Run(f, func(t *testing.T) {
			r, err := render(t, valuesFile(t, f))
			if err != nil {
				t.Fatal(err)
			}
			for what, pod := range r.podTemplates() {
				assertRestricted(t, what, pod)
				if pod.Spec.Containers[0].Name != "done" { // the helm test without its audit: relay version
					assertRelayConfigLoads(t, what, pod)
				}
				assertSecretFiles(t, what, pod)
				// Only relay's instances are taken for relay's: a CronJob's
				// pods in the PodDisruptionBudget stop it (a Job has no
				// scale subresource), and the console would count as one.
				if what == "StatefulSet" {
					continue
				}
				if selects(t, r.statefulSet.Spec.Selector, pod.Labels) && what != "Deployment "+r.statefulSet.Name+"-console" {
					t.Errorf("%s: its pods' labels %v are taken by the StatefulSet's selector", what, pod.Labels)
				}
				for _, pdb := range r.pdbs {
					if selects(t, pdb.Spec.Selector, pod.Labels) {
						t.Errorf("%s: the PodDisruptionBudget counts its pods (%v)", what, pod.Labels)
					}
				}
			}
			for _, pdb := range r.pdbs {
				if !selects(t, pdb.Spec.Selector, r.statefulSet.Spec.Template.Labels) {
					t.Errorf("the PodDisruptionBudget does not count relay's pods")
				}
			}
			assertStatefulSet(t, r.statefulSet)
		})
	}
}

// podTemplates are every pod the chart renders, by what runs it: the
// StatefulSet's, the CronJob's, the Deployment's, the Jobs' and the helm
// test's (as a template, for the same checks).
func (r *rendered) podTemplates() map[string]*corev1.PodTemplateSpec {
	pods := map[string]*corev1.PodTemplateSpec{"StatefulSet": &r.statefulSet.Spec.Template}
	for i := range r.cronJobs {
		pods["CronJob "+r.cronJobs[i].Name] = &r.cronJobs[i].Spec.JobTemplate.Spec.Template
	}
	for i := range r.deployments {
		pods["Deployment "+r.deployments[i].Name] = &r.deployments[i].Spec.Template
	}
	for i := range r.jobs {
		pods["Job "+r.jobs[i].Name] = &r.jobs[i].Spec.Template
	}
	for i := range r.pods {
		pods["Pod "+r.pods[i].Name] = &corev1.PodTemplateSpec{ObjectMeta: r.pods[i].ObjectMeta, Spec: r.pods[i].Spec}
	}
	return pods
}

// assertSecretFiles checks that every secret relay reads from a file
// (a *_FILE variable) is in a Secret mounted whole and read-only: a
// subPath mount never sees the Secret change, and relay could not follow
// a rotation.
func assertSecretFiles(t *testing.T, what string, pod *corev1.PodTemplateSpec) {
	t.Helper()
	c := pod.Spec.Containers[0]
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, e := range c.Env {
		if !strings.HasSuffix(e.Name, "_FILE") || e.Name == "RELAY_RULES_FILE" {
			continue // RELAY_RULES_FILE names the rules, not a secret
		}
		i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return strings.HasPrefix(e.Value, strings.TrimSuffix(m.MountPath, "/")+"/")
		})
		if i < 0 {
			t.Errorf("%s: %s=%s is in no mounted volume", what, e.Name, e.Value)
			continue
		}
		m := c.VolumeMounts[i]
		if !m.ReadOnly || m.SubPath != "" || volumes[m.Name].Secret == nil {
			t.Errorf("%s: %s is read from mount %+v: want a Secret mounted whole, read-only", what, e.Name, m)
		}
	}
}

// assertRestricted evaluates pod against the Pod Security Standards'
// restricted profile, latest version, as the admission controller does.
func assertRestricted(t *testing.T, what string, pod *corev1.PodTemplateSpec) {
	t.Helper()
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lv := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	res := policy.AggregateCheckResults(ev.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec))
	if !res.Allowed {
		t.Errorf("%s: the restricted profile refuses the pod: %s: %s", what, res.ForbiddenReason(), res.ForbiddenDetail())
	}
}

// assertRelayConfigLoads loads relay's configuration from the container's
// environment as the kubelet would expand it (the pod name for
// $(POD_NAME); a value from a Secret or ConfigMap stands in as "x").
func assertRelayConfigLoads(t *testing.T, what string, pod *corev1.PodTemplateSpec) {
	t.Helper()
	if _, err := relayConfig(t, what, pod); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// relayConfig is relay's configuration from the first container's
// environment, loaded as assertRelayConfigLoads describes.
func relayConfig(t *testing.T, what string, pod *corev1.PodTemplateSpec) (*config.Config, error) {
	t.Helper()
	c := pod.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			v = "relay-3"
		case e.ValueFrom != nil:
			v = "https://hook:8443/x"
		}
		env[e.Name] = strings.ReplaceAll(v, "$(POD_NAME)", env["POD_NAME"])
	}
	if what != "StatefulSet" {
		// The audit, the console, the topics Job and the helm test run
		// with the daemon's environment, without an instance identity
		// (relay's operator commands derive their own).
		if _, ok := env["RELAY_TRANSACTIONAL_ID"]; ok {
			t.Errorf("%s: the audit has the instance's RELAY_TRANSACTIONAL_ID", what)
		}
		env["RELAY_TRANSACTIONAL_ID"] = "relay-cli"
	}
	// A secret file lives in the pod; here each is a file of its own
	// with a stand-in secret, so that relay reads it as it would there.
	dir := t.TempDir()
	for k, v := range env {
		if strings.HasSuffix(k, "_FILE") && strings.HasPrefix(v, "/var/run/secrets/relay/") {
			f := filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(v, "/var/run/secrets/relay/"), "/", "_"))
			if err := os.WriteFile(f, []byte("a-stand-in-secret-value\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			env[k] = f
		}
	}
	environ := make([]string, 0, len(env))
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := config.Load(lookup, environ)
	if err != nil {
		return nil, fmt.Errorf("relay refuses the rendered environment: %w", err)
	}
	if unknown := config.Unknown(environ); len(unknown) > 0 {
		return nil, fmt.Errorf("variables relay does not know: %v", unknown)
	}
	return cfg, nil
}

// assertStatefulSet checks what the chart promises about relay.
func assertStatefulSet(t *testing.T, s *appsv1.StatefulSet) {
	t.Helper()
	if s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q, want Parallel", s.Spec.PodManagementPolicy)
	}
	pod := s.Spec.Template.Spec
	c := pod.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}

	// A transactional id stable per pod: from the pod's name, which a
	// StatefulSet keeps across restarts and reschedules.
	if e := env["POD_NAME"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME is not the pod's name: %+v", e)
	}
	if v := env["RELAY_TRANSACTIONAL_ID"].Value; !strings.HasSuffix(v, "-$(POD_NAME)") || strings.Count(v, "$(") != 1 {
		t.Errorf("RELAY_TRANSACTIONAL_ID %q is not derived from the pod name", v)
	}
	if e, ok := env["RELAY_KAFKA_GROUP_INSTANCE_ID"]; ok && e.Value != "$(POD_NAME)" {
		t.Errorf("static membership from %q, want the pod name", e.Value)
	}
	// Kubernetes expands $(VAR) only from variables defined before.
	if slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAME" }) >
		slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "RELAY_TRANSACTIONAL_ID" }) {
		t.Error("POD_NAME is defined after RELAY_TRANSACTIONAL_ID, which the kubelet would then not expand")
	}

	// The grace period covers the shutdown bound and the span flush.
	bound, err := time.ParseDuration(env["RELAY_SHUTDOWN_TIMEOUT"].Value)
	if err != nil {
		t.Fatalf("RELAY_SHUTDOWN_TIMEOUT: %v", err)
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= bound+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v is not above RELAY_SHUTDOWN_TIMEOUT %s + the 5 s span flush", g, bound)
	}

	// The probes reach the port relay serves, on the pod's interface.
	addr := env["RELAY_HTTP_ADDR"].Value
	host, portText, err := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(portText)
	if err = errors.Join(err, perr); err != nil || host != "" {
		t.Fatalf("RELAY_HTTP_ADDR %q: want :PORT, every interface (%v)", addr, err)
	}
	var served *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].ContainerPort == int32(port) {
			served = &c.Ports[i]
		}
	}
	if served == nil {
		t.Fatalf("no container port %d (RELAY_HTTP_ADDR)", port)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s probe: not an HTTP GET", name)
			continue
		}
		if pp := p.HTTPGet.Port; pp.StrVal != served.Name && int(pp.IntVal) != port {
			t.Errorf("%s probe on port %s, relay serves %d (%s)", name, pp.String(), port, served.Name)
		}
	}
	if c.LivenessProbe.HTTPGet.Path != "/livez" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes on %s and %s, want /livez and /readyz", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}

	// The security context, spelled out (the profile check above admits
	// some of these by the pod's context instead).
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container security context: %+v", sc)
	}
	if psc := pod.SecurityContext; psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("the pod does not run as the image's user 65532: %+v", psc)
	}
}

// The whole of full.yaml: every optional object, and what each holds.
func TestChartOptionalObjects(t *testing.T) {
	r, err := render(t, valuesFile(t, "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.monitors) != 2 || len(r.rules) != 1 || len(r.cronJobs) != 1 || len(r.pdbs) != 1 {
		t.Fatalf("monitors %d, rules %d, cron jobs %d, PDBs %d; want 2, 1, 1, 1", len(r.monitors), len(r.rules), len(r.cronJobs), len(r.pdbs))
	}
	// The PrometheusRule holds the alert rules promtool checks.
	alerts, err := os.ReadFile(filepath.Join(chartDir, "files", "relay-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Groups []map[string]any `json:"groups"`
	}
	if err := yaml.Unmarshal(alerts, &want); err != nil {
		t.Fatal(err)
	}
	// ... its runbook links at the base the values give, without the
	// alert they disable.
	for _, g := range want.Groups {
		var kept []any
		for _, rl := range g["rules"].([]any) {
			rm := rl.(map[string]any)
			if rm["alert"] == "RelayAuditBehind" {
				continue
			}
			if a, ok := rm["annotations"].(map[string]any); ok && a["runbook_url"] != nil {
				a["runbook_url"] = strings.Replace(a["runbook_url"].(string), "https://relay.invalid/docs/RUNBOOK.md", "https://git.example/platform/relay/blob/v0.7.0/docs/RUNBOOK.md", 1)
			}
			kept = append(kept, rm)
		}
		g["rules"] = kept
	}
	if !reflect.DeepEqual(r.rules[0].Spec.Groups, want.Groups) {
		t.Error("the PrometheusRule's groups differ from files/relay-alerts.yml with the values' runbook base, less RelayAuditBehind")
	}
	// The dashboard ConfigMap holds the dashboard, byte for byte.
	dash, err := os.ReadFile(filepath.Join(chartDir, "files", "relay-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cm := range r.configMaps {
		if d, ok := cm.Data["relay-dashboard.json"]; ok {
			found = true
			if !bytes.Equal([]byte(d), bytes.TrimRight(dash, "\n")) {
				t.Error("the dashboard ConfigMap differs from files/relay-dashboard.json")
			}
		}
	}
	if !found {
		t.Error("no dashboard ConfigMap")
	}
	// The audit: relay audit of the source from its cursor (the window
	// starts a partition without one), a Job that fails on a finding,
	// never two at once.
	cj := r.cronJobs[0]
	c := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	args := strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
	for _, want := range []string{"relay audit", "--source=orders", "--cursor", "--from=25h", "--metrics-file=", "--push-url=http://pushgateway.monitoring:9091"} {
		if !strings.Contains(args, want) {
			t.Errorf("the audit runs %q, without %q", args, want)
		}
	}
	// The console: one replica, its token from the Secret mounted whole,
	// the proxy's header with its addresses, the audit's result, behind
	// the ingress.
	if len(r.deployments) != 1 || len(r.ingresses) != 1 {
		t.Fatalf("deployments %d, ingresses %d; want the console's 1 and 1", len(r.deployments), len(r.ingresses))
	}
	d := r.deployments[0]
	cc := d.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range cc.Env {
		env[e.Name] = e.Value
	}
	if *d.Spec.Replicas != 1 || strings.Join(cc.Command, " ") != "/usr/local/bin/relay console" || env["RELAY_CONSOLE_ADDR"] != "127.0.0.1:9465" || env["RELAY_CONSOLE_METRICS_ADDR"] != ":9466" ||
		env["RELAY_CONSOLE_TOKEN_FILE"] != "/var/run/secrets/relay/console-token/token" || env["RELAY_CONSOLE_USER_HEADER"] != "X-Forwarded-User" ||
		env["RELAY_CONSOLE_PROXY_SOCKET"] != "/run/relay-console/proxy.sock" || env["RELAY_CONSOLE_TRUSTED_PROXIES"] != "" ||
		env["RELAY_CONSOLE_FORWARDED_BY"] != "10.244.0.0/16" || env["RELAY_CONSOLE_AUDIT_METRICS"] == "" ||
		env["RELAY_CONSOLE_READ_AUTH"] != "signed-in" || env["RELAY_CONSOLE_ALLOWED_HOSTS"] != "relay-console.example" {
		t.Errorf("console: replicas %d, command %v, env %v", *d.Spec.Replicas, cc.Command, env)
	}
	// Least privilege: the console's pod carries no hook setting and none
	// of the daemon's secrets; it has its own Kafka principal.
	for name := range env {
		if strings.HasPrefix(name, "RELAY_HOOK_") {
			t.Errorf("the console's pod has %s", name)
		}
	}
	if env["RELAY_KAFKA_SASL_USERNAME"] != "relay-console" || env["RELAY_KAFKA_SASL_PASSWORD_FILE"] != "/var/run/secrets/relay/relay-console-kafka/password" || len(cc.EnvFrom) != 0 {
		t.Errorf("the console's Kafka principal: %q, %q, envFrom %v", env["RELAY_KAFKA_SASL_USERNAME"], env["RELAY_KAFKA_SASL_PASSWORD_FILE"], cc.EnvFrom)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && (v.Secret.SecretName == "relay-hook" || v.Secret.SecretName == "relay-kafka") {
			t.Errorf("the console's pod mounts the daemon's Secret %s", v.Secret.SecretName)
		}
	}
	// The oauth2-proxy sidecar: the only way in, through the Service and
	// the NetworkPolicy, to the console on the pod's loopback.
	if cs := d.Spec.Template.Spec.Containers; len(cs) != 2 || cs[1].Name != "oauth2-proxy" || !slices.Contains(cs[1].Args, "--upstream=unix:///run/relay-console/proxy.sock") ||
		!slices.Contains(cs[1].Args, "--pass-user-headers=true") || cs[1].EnvFrom[0].SecretRef.Name != "relay-console-oidc" {
		t.Errorf("the oauth2-proxy sidecar: %+v", cs[1:])
	}
	// With the sidecar the console's own port is the pod's loopback's:
	// not declared, not probed; the probes and Prometheus have the port
	// with /healthz and /metrics only.
	if len(cc.Ports) != 1 || cc.Ports[0].Name != "http" || cc.Ports[0].ContainerPort != 9466 ||
		cc.ReadinessProbe.HTTPGet.Port.String() != "http" || cc.LivenessProbe.HTTPGet.Port.String() != "http" {
		t.Errorf("the console's ports %+v, probes on %v and %v", cc.Ports, cc.ReadinessProbe.HTTPGet.Port, cc.LivenessProbe.HTTPGet.Port)
	}
	for _, s := range r.services {
		if s.Name == "relay-console" && s.Spec.Ports[0].TargetPort.String() != "proxy" {
			t.Errorf("the console's Service targets %s, not the sidecar", s.Spec.Ports[0].TargetPort.String())
		}
	}
	if len(r.netpols) != 2 || r.netpols[0].Spec.Ingress[0].Ports[0].Port.String() != "proxy" || len(r.netpols[0].Spec.Ingress[0].From) != 1 {
		t.Fatalf("the console's NetworkPolicy: %+v", r.netpols)
	}
	// relay's own pods (not the console's, not the audit's): the metrics
	// port, from Prometheus.
	if np := r.netpols[1]; np.Spec.Ingress[0].Ports[0].Port.String() != "http" || len(np.Spec.PodSelector.MatchExpressions) != 1 ||
		np.Spec.PodSelector.MatchExpressions[0].Operator != metav1.LabelSelectorOpDoesNotExist {
		t.Errorf("relay's NetworkPolicy: %+v", np.Spec)
	}
	ing := r.ingresses[0]
	if b := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service; b.Name != "relay-console" || b.Port.Name != "console" || len(ing.Spec.TLS) != 1 {
		t.Errorf("ingress: backend %+v, tls %v", b, ing.Spec.TLS)
	}
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent || cj.Spec.JobTemplate.Spec.BackoffLimit == nil || *cj.Spec.JobTemplate.Spec.BackoffLimit != 0 {
		t.Errorf("audit CronJob: concurrency %q, backoff limit %v", cj.Spec.ConcurrencyPolicy, cj.Spec.JobTemplate.Spec.BackoffLimit)
	}
}

// What a user gets wrong is refused with a message naming it.
func TestChartRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(v map[string]any)
		want string
	}{
		{"no source topics", func(v map[string]any) { v["relay"].(map[string]any)["sourceTopics"] = "" }, "relay.sourceTopics is required"},
		{"no brokers", func(v map[string]any) { delete(v, "kafka") }, "kafka"},
		{"a grace period below the bound", func(v map[string]any) { v["terminationGracePeriodSeconds"] = 30 }, "would race relay's final commit"},
		{"a misspelt value", func(v map[string]any) { v["replica"] = 3 }, "replica"},
		{"a RELAY_ variable relay spells otherwise", func(v map[string]any) {
			v["relay"].(map[string]any)["env"] = map[string]any{"retry_tiers": "30s"}
		}, "retry_tiers"},
		{"the audit without a source", func(v map[string]any) { v["audit"] = map[string]any{"enabled": true} }, "audit.source is required"},
		{"an Ingress without TLS", func(v map[string]any) {
			v["console"] = map[string]any{"enabled": true, "tokenSecret": map[string]any{"name": "t"}, "ingress": map[string]any{"enabled": true, "host": "c.example"}}
		}, "console.ingress.tls needs an entry"},
		{"an Ingress without a way to sign in", func(v map[string]any) {
			v["console"] = map[string]any{"enabled": true, "ingress": map[string]any{"enabled": true, "host": "c.example", "tls": []any{map[string]any{"hosts": []any{"c.example"}, "secretName": "x"}}}}
		}, "needs a way to sign in"},
		// Pentest finding: behind an Ingress without ingressProxies every
		// operator shared the ingress pod's limits.
		{"an Ingress without ingressProxies", func(v map[string]any) {
			v["console"] = map[string]any{"enabled": true, "tokenSecret": map[string]any{"name": "t"}, "ingress": map[string]any{"enabled": true, "host": "c.example",
				"tls": []any{map[string]any{"hosts": []any{"c.example"}, "secretName": "x"}}}}
		}, "needs console.ingressProxies"},
		{"an Ingress whose TLS does not cover its host", func(v map[string]any) {
			v["console"] = map[string]any{"enabled": true, "tokenSecret": map[string]any{"name": "t"}, "ingress": map[string]any{"enabled": true, "host": "c.example",
				"tls": []any{map[string]any{"hosts": []any{"other.example"}, "secretName": "x"}}}}
		}, "console.ingress.tls needs an entry"},
		{"an Ingress whose TLS has no certificate", func(v map[string]any) {
			v["console"] = map[string]any{"enabled": true, "tokenSecret": map[string]any{"name": "t"}, "ingress": map[string]any{"enabled": true, "host": "c.example",
				"tls": []any{map[string]any{"hosts": []any{"c.example"}}}}}
		}, "console.ingress.tls needs an entry"},
		{"a sidecar flag that skips the sign-in", func(v map[string]any) {
			v["console"] = map[string]any{"enabled": true, "oauth2Proxy": map[string]any{"enabled": true, "secretName": "s", "image": map[string]any{"repository": "r", "tag": "t"},
				"args": []any{"--skip-auth-route=^/"}}}
		}, "would let a request past the sign-in"},
		{"a NetworkPolicy open to every namespace", func(v map[string]any) {
			v["console"] = map[string]any{"enabled": true, "networkPolicy": map[string]any{"enabled": true, "from": []any{map[string]any{"namespaceSelector": map[string]any{}}}}}
		}, "defeats the policy"},
		{"a NetworkPolicy open to every pod of every namespace", func(v map[string]any) {
			v["console"] = map[string]any{"enabled": true, "networkPolicy": map[string]any{"enabled": true,
				"from": []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{}}, "podSelector": map[string]any{}}}}}
		}, "defeats the policy"},
		// Pentest findings: three peers that admitted far more than the
		// ingress controller.
		{"a NetworkPolicy open to every pod of the release's namespace", func(v map[string]any) {
			v["console"] = map[string]any{"enabled": true, "networkPolicy": map[string]any{"enabled": true, "from": []any{map[string]any{"podSelector": map[string]any{}}}}}
		}, "defeats the policy"},
		{"a NetworkPolicy open to every namespace by Exists", func(v map[string]any) {
			v["console"] = map[string]any{"enabled": true, "networkPolicy": map[string]any{"enabled": true, "from": []any{map[string]any{
				"namespaceSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "Exists"}}}}}}}
		}, "defeats the policy"},
		{"a NetworkPolicy open to a /8", func(v map[string]any) {
			v["networkPolicy"] = map[string]any{"enabled": true, "from": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/8"}}}}
		}, "defeats the policy"},
		{"a NetworkPolicy open to a whole /16 pod network", func(v map[string]any) {
			v["networkPolicy"] = map[string]any{"enabled": true, "from": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.244.0.0/16"}}}}
		}, "defeats the policy"},
		{"a NetworkPolicy open to every IPv4 address, IPv6-mapped", func(v map[string]any) {
			v["networkPolicy"] = map[string]any{"enabled": true, "from": []any{map[string]any{"ipBlock": map[string]any{"cidr": "::ffff:0:0/96"}}}}
		}, "defeats the policy"},
		{"a NetworkPolicy open to half the addresses", func(v map[string]any) {
			v["networkPolicy"] = map[string]any{"enabled": true, "from": []any{map[string]any{"ipBlock": map[string]any{"cidr": "::/1"}}}}
		}, "defeats the policy"},
		{"a bare -- in the sidecar's args", func(v map[string]any) {
			v["console"] = map[string]any{"enabled": true, "oauth2Proxy": map[string]any{"enabled": true, "secretName": "s", "image": map[string]any{"repository": "r", "tag": "t"},
				"args": []any{"--provider=oidc", "--"}}}
		}, "is not a --flag"},
		{"a NetworkPolicy open to every address", func(v map[string]any) {
			v["networkPolicy"] = map[string]any{"enabled": true, "from": []any{map[string]any{"ipBlock": map[string]any{"cidr": "0.0.0.0/0"}}}}
		}, "defeats the policy"},
		{"the sidecar without an image", func(v map[string]any) {
			v["console"] = map[string]any{"enabled": true, "oauth2Proxy": map[string]any{"enabled": true, "secretName": "s"}}
		}, "console.oauth2Proxy.image.repository is required"},
		{"the sidecar beside another proxy's header", func(v map[string]any) {
			v["console"] = map[string]any{"enabled": true, "userHeader": "X-User", "trustedProxies": []any{"10.0.0.1"},
				"oauth2Proxy": map[string]any{"enabled": true, "secretName": "s", "image": map[string]any{"repository": "r", "tag": "t"}}}
		}, "exclude each other"},
		{"Strimzi without its cluster", func(v map[string]any) { v["strimzi"] = map[string]any{"enabled": true} }, "strimzi.cluster is required"},
		{"KafkaTopics without the sources' partitions", func(v map[string]any) { v["strimzi"] = map[string]any{"enabled": true, "cluster": "c"} },
			"strimzi.topics needs sourcePartitions.orders"},
		{"KafkaTopics beside the topics Job", func(v map[string]any) {
			v["strimzi"] = map[string]any{"enabled": true, "cluster": "c"}
			v["sourcePartitions"] = map[string]any{"orders": 3}
			v["topicsJob"] = map[string]any{"enabled": true}
		}, "two owners"},
		{"a KafkaUser for a command relay has not", func(v map[string]any) {
			v["strimzi"] = map[string]any{"enabled": true, "cluster": "c", "topics": map[string]any{"enabled": false}, "user": map[string]any{"commands": []any{"run", "admin"}}}
		}, "/strimzi/user/commands/1"},
		{"a retention relay cannot read", func(v map[string]any) {
			v["strimzi"] = map[string]any{"enabled": true, "cluster": "c"}
			v["sourcePartitions"] = map[string]any{"orders": 3}
			v["relay"].(map[string]any)["env"] = map[string]any{"RELAY_OUTPUT_RETENTION": "7 days"}
		}, "RELAY_OUTPUT_RETENTION: \"7 days\" is not a duration"},
		{"an alert that is not relay's disabled", func(v map[string]any) {
			v["prometheusRule"] = map[string]any{"enabled": true, "disabled": map[string]any{"RelayAuditBehnd": true}}
		}, "prometheusRule.disabled: RelayAuditBehnd is not one of relay's alerts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := valuesFile(t, "minimal.yaml")
			c.edit(v)
			_, err := render(t, v)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v; want an error saying %q", err, c.want)
			}
		})
	}
}

// The console's pod gets none of the daemon's credentials, whatever the
// values carry inline, and runs as its own ServiceAccount (found by an
// attack: an inline SASL password and the registry's password reached it,
// and it ran as the daemon's account, with any cloud identity bound to it).
func TestConsoleGetsNoDaemonCredentials(t *testing.T) {
	v := valuesFile(t, "full.yaml")
	v["kafka"].(map[string]any)["properties"].(map[string]any)["sasl.password"] = "inline-daemon-pass"
	v["relay"].(map[string]any)["env"].(map[string]any)["RELAY_SCHEMA_REGISTRY_PASSWORD"] = "registry-pass"
	v["relay"].(map[string]any)["env"].(map[string]any)["RELAY_KAFKA_SASL_USERNAME"] = "daemon-user-name"
	v["relay"].(map[string]any)["env"].(map[string]any)["RELAY_TRACE_URL"] = "https://u:trace-pass@trace/{traceId}"
	v["kafka"].(map[string]any)["properties"].(map[string]any)["ssl.key.pem"] = "-----BEGIN PRIVATE KEY-----daemon-key-pem"
	v["kafka"].(map[string]any)["properties"].(map[string]any)["sasl.oauthbearer.config"] = "secret-oauth-config"
	v["serviceAccount"] = map[string]any{"create": true, "annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/relay"}}
	r, err := render(t, v)
	if err != nil {
		t.Fatal(err)
	}
	pod := r.deployments[0].Spec.Template.Spec
	for _, e := range pod.Containers[0].Env {
		if strings.Contains(e.Value, "inline-daemon-pass") || strings.Contains(e.Value, "registry-pass") || e.Name == "RELAY_SCHEMA_REGISTRY_PASSWORD" ||
			strings.Contains(e.Value, "daemon-user-name") || strings.Contains(e.Value, "trace-pass") || strings.Contains(e.Value, "daemon-key-pem") ||
			strings.Contains(e.Value, "secret-oauth-config") {
			t.Errorf("the console's pod has %s=%s", e.Name, e.Value)
		}
	}
	if pod.ServiceAccountName != "relay-console" || pod.ServiceAccountName == r.statefulSet.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("the console runs as %q, the daemon as %q", pod.ServiceAccountName, r.statefulSet.Spec.Template.Spec.ServiceAccountName)
	}
	for _, sa := range r.serviceAccounts {
		if sa.Name == "relay-console" && len(sa.Annotations) != 0 {
			t.Errorf("the console's account carries the daemon's annotations: %v", sa.Annotations)
		}
	}
}

// Without the sidecar the console listens on the pod's address (its
// Service's target) and on the metrics port; with the podMonitor on, its
// NetworkPolicy lets Prometheus reach the metrics port and nothing else.
func TestConsoleMetricsPort(t *testing.T) {
	v := valuesFile(t, "minimal.yaml")
	v["console"] = map[string]any{"enabled": true, "tokenSecret": map[string]any{"name": "t"}}
	v["podMonitor"] = map[string]any{"enabled": true}
	r, err := render(t, v)
	if err != nil {
		t.Fatal(err)
	}
	cc := r.deployments[0].Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range cc.Env {
		env[e.Name] = e.Value
	}
	if env["RELAY_CONSOLE_ADDR"] != ":9465" || env["RELAY_CONSOLE_METRICS_ADDR"] != ":9466" || len(cc.Ports) != 2 ||
		cc.Ports[0].Name != "console" || cc.Ports[1].Name != "http" {
		t.Errorf("the console without the sidecar: addr %q, metrics %q, ports %+v", env["RELAY_CONSOLE_ADDR"], env["RELAY_CONSOLE_METRICS_ADDR"], cc.Ports)
	}
	var rules []string
	for _, np := range r.netpols {
		if np.Name != "relay-console" {
			continue
		}
		for _, in := range np.Spec.Ingress {
			for _, p := range in.Ports {
				rules = append(rules, p.Port.String())
			}
		}
	}
	if strings.Join(rules, ",") != "console,http" {
		t.Errorf("the console's NetworkPolicy admits ports %v, want console (the ingress controller) and http (Prometheus)", rules)
	}
}

// By default the PrometheusRule links to no placeholder host: without a
// runbook base, its alerts carry no runbook_url (they carried
// relay.invalid links); every severity is critical or warning.
func TestPrometheusRuleDefaults(t *testing.T) {
	v := valuesFile(t, "minimal.yaml")
	v["prometheusRule"] = map[string]any{"enabled": true}
	r, err := render(t, v)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r.rules[0].Spec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "relay.invalid") || strings.Contains(string(b), "runbook_url") {
		t.Errorf("the default PrometheusRule links somewhere: %.300s", b)
	}
	n := 0
	for _, g := range r.rules[0].Spec.Groups {
		for _, rl := range g["rules"].([]any) {
			if sev := rl.(map[string]any)["labels"].(map[string]any)["severity"]; sev != "critical" && sev != "warning" {
				t.Errorf("%v: severity %v", rl.(map[string]any)["alert"], sev)
			}
			n++
		}
	}
	if n < 20 {
		t.Errorf("%d alerts, want every one of relay's", n)
	}
}

// What a platform team expects of a chart: the startup probe waits for
// the loop (/startupz) and every probe takes its values; every container
// falls back to its log for a termination message; global pull secrets
// come first; a partition for canaries; the monitors' namespace, timeout
// and relabelings; the global registry before the sidecar's image too;
// and no image without a registry.
func TestChartPlatformConventions(t *testing.T) {
	v := valuesFile(t, "full.yaml")
	v["global"] = map[string]any{"imageRegistry": "mirror.example", "imagePullSecrets": []any{map[string]any{"name": "global-pull"}}}
	v["imagePullSecrets"] = []any{map[string]any{"name": "own-pull"}}
	v["probes"] = map[string]any{"startup": map[string]any{"failureThreshold": 30}}
	v["updateStrategy"] = map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"partition": 2}}
	relabel := []any{map[string]any{"action": "labeldrop", "regex": "pod_template_hash"}}
	v["serviceMonitor"] = map[string]any{"enabled": true, "namespace": "monitoring", "scrapeTimeout": "10s", "relabelings": relabel, "metricRelabelings": relabel}
	r, err := render(t, v)
	if err != nil {
		t.Fatal(err)
	}
	ss := r.statefulSet.Spec
	c := ss.Template.Spec.Containers[0]
	if c.StartupProbe.HTTPGet.Path != "/startupz" || c.StartupProbe.FailureThreshold != 30 || c.StartupProbe.PeriodSeconds != 10 ||
		c.LivenessProbe.HTTPGet.Path != "/livez" || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.FailureThreshold != 6 {
		t.Errorf("probes: startup %+v, liveness %+v", c.StartupProbe, c.LivenessProbe)
	}
	if ss.UpdateStrategy.RollingUpdate == nil || *ss.UpdateStrategy.RollingUpdate.Partition != 2 {
		t.Errorf("updateStrategy %+v", ss.UpdateStrategy)
	}
	if s := ss.Template.Spec.ImagePullSecrets; len(s) != 2 || s[0].Name != "global-pull" || s[1].Name != "own-pull" {
		t.Errorf("imagePullSecrets %v", s)
	}
	if c.Image != "mirror.example/relay:v1.2.3" {
		t.Errorf("image %s", c.Image)
	}
	for what, pod := range r.podTemplates() {
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
				t.Errorf("%s: container %s has terminationMessagePolicy %q", what, c.Name, c.TerminationMessagePolicy)
			}
			if c.Name == "oauth2-proxy" && !strings.HasPrefix(c.Image, "mirror.example/") {
				t.Errorf("the sidecar's image %s is not from the global registry", c.Image)
			}
		}
	}
	for _, m := range r.monitors {
		if m.Kind != "ServiceMonitor" {
			continue
		}
		e := m.Spec.Endpoints[0]
		if m.Namespace != "monitoring" || m.Spec.NamespaceSelector == nil || e.ScrapeTimeout != "10s" || len(e.Relabelings) != 1 || len(e.MetricRelabelings) != 1 {
			t.Errorf("ServiceMonitor: namespace %q, selector %+v, endpoint %+v", m.Namespace, m.Spec.NamespaceSelector, e)
		}
	}
	// No registry: refused, naming the value.
	v = valuesFile(t, "minimal.yaml")
	delete(v, "image")
	if _, err := render(t, v); err == nil || !strings.Contains(err.Error(), "image.registry (or global.imageRegistry) is required") {
		t.Errorf("without a registry: %v", err)
	}
}
