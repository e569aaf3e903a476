package k8s

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// The OpenShift values (global.compatibility.openshift.adaptSecurityContext:
// force: the pods name no user or group) under what OpenShift's
// restricted-v2 does to them: an arbitrary UID from the namespace's range
// and that UID as fsGroup, patched onto the StatefulSet here as the
// admission plugin would set it. relay runs as that user on its read-only
// root filesystem, in the restricted namespace, and relays records: every
// one in its end state (relay audit).
func TestOpenShiftValuesRunWithAnArbitraryUID(t *testing.T) {
	c := newCluster(t)
	d := c.deployment(t, "openshift", 2, 2)
	ns, source, group, values := d.ns, d.source, d.group, d.values
	values["global"] = map[string]any{"compatibility": map[string]any{"openshift": map[string]any{"adaptSecurityContext": "force"}}}
	c.install(t, d.cfg, ns, "relay", values)

	const uid = 1000680000
	patch, err := yaml.YAMLToJSON([]byte(`
spec:
  template:
    spec:
      securityContext:
        runAsUser: 1000680000
        runAsGroup: 1000680000
        fsGroup: 1000680000
`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.client.AppsV1().StatefulSets(ns).Patch(ctx, "relay", types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "relay-k8s-test"}); err != nil {
		t.Fatal(err)
	}
	c.rolled(t, ns, "relay")
	for _, p := range c.readyPods(t, ns, relayPods) {
		sc := p.Spec.SecurityContext
		if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != uid {
			t.Fatalf("%s runs without the arbitrary UID: %+v", p.Name, sc)
		}
		for _, ctr := range p.Spec.Containers {
			if ctr.SecurityContext == nil || ctr.SecurityContext.ReadOnlyRootFilesystem == nil || !*ctr.SecurityContext.ReadOnlyRootFilesystem {
				t.Errorf("%s/%s: root filesystem not read-only", p.Name, ctr.Name)
			}
			if ctr.SecurityContext != nil && ctr.SecurityContext.RunAsUser != nil {
				t.Errorf("%s/%s names a user (%d) under the OpenShift values", p.Name, ctr.Name, *ctr.SecurityContext.RunAsUser)
			}
		}
	}

	l := c.startLoad(t, source, 10, 100)
	c.waitAcked(t, l, 500)
	acked := l.finish(t)
	c.drained(t, group, source, 2)
	c.outputs(t, source+".valid", l.sent)
	c.audit(t, source, group, acked)
}
