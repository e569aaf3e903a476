package k8s

import (
	"context"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The chart installs on a real kubelet: the topics Job (a pre-install
// hook) creates the topics, three relay pods start under the restricted
// Pod Security Standard and become Ready (their /startupz, /readyz), and
// `helm test` passes as a pod (relay probe of each replica's /readyz
// through the headless Service's DNS names, then relay audit).
func TestChartInstallsAndPassesHelmTest(t *testing.T) {
	c := newCluster(t)
	d := c.deployment(t, "install", 6, 3)
	ns, cfg := d.ns, d.cfg
	rel := c.install(t, cfg, ns, "relay", d.values)
	if rel.Info.Status != release.StatusDeployed {
		t.Fatalf("release %s", rel.Info.Status)
	}

	pods := c.readyPods(t, ns, relayPods)
	if len(pods) != 3 {
		t.Fatalf("%d relay pods ready, want 3", len(pods))
	}
	for _, p := range pods {
		for _, s := range p.Status.ContainerStatuses {
			if s.RestartCount != 0 {
				t.Errorf("%s/%s restarted %d times", p.Name, s.Name, s.RestartCount)
			}
		}
	}

	// The topics Job ran (a hook: deleted when it succeeds, so its mark
	// is the release's hook record).
	for _, h := range rel.Hooks {
		if h.Kind == "Job" && h.LastRun.Phase != release.HookPhaseSucceeded {
			t.Errorf("hook %s: %s", h.Name, h.LastRun.Phase)
		}
	}

	test := action.NewReleaseTesting(cfg)
	test.Namespace, test.Timeout = ns, 5*time.Minute
	tested, err := test.Run("relay")
	if err != nil {
		t.Fatalf("helm test: %v", err)
	}
	for _, h := range tested.Hooks {
		if h.LastRun.Phase != release.HookPhaseSucceeded {
			t.Errorf("helm test hook %s: %s", h.Name, h.LastRun.Phase)
		}
	}
}

// readyPods waits (up to two minutes) until the pods the selector picks
// are all Ready, and returns them.
func (c *cluster) readyPods(t *testing.T, ns, selector string) []corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		list, err := c.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, p := range list.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready == len(list.Items) && ready > 0 {
			return list.Items
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pods (%s) ready after two minutes", ready, len(list.Items), selector)
		}
		time.Sleep(time.Second)
	}
}
