package k8s

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Under a steady load from the host, what a cluster does to relay's pods
// in a week: each replica deleted in turn, an eviction through the API
// (the PodDisruptionBudget's), an eviction by the kubelet (a pod over its
// local storage: two seconds from SIGTERM to SIGKILL), a helm upgrade that
// rolls the StatefulSet to another image, a scale 3 → 5 → 2, and a
// broker restart. At the end every source record is in exactly one end
// state (relay audit, exit 0), the output holds each record once, every
// key's in the order produced (a read_committed witness), and no
// container restarted: the only pods that went away were the ones the
// test took.
func TestEveryRecordOnceThroughPodFaults(t *testing.T) {
	c := newCluster(t)
	d := c.deployment(t, "faults", 6, 3)
	ns, cfg, source, group, values := d.ns, d.cfg, d.source, d.group, d.values
	c.install(t, cfg, ns, "relay", values)
	c.readyPods(t, ns, relayPods)

	l := c.startLoad(t, source, 60, 150)
	step := func(what string, f func()) {
		start := time.Now()
		f()
		c.noRestarts(t, ns, c.readyPods(t, ns, relayPods))
		t.Logf("%s: %s, %d records acknowledged so far", what, time.Since(start).Round(time.Second), l.acked.Load())
	}
	for _, pod := range []string{"relay-0", "relay-1", "relay-2"} {
		step("kubectl delete pod "+pod, func() { c.deletePod(t, ns, pod) })
	}
	step("eviction of relay-1", func() { c.evict(t, ns, "relay-1") })
	step("the kubelet evicts relay-2", func() { c.kubeletEvicts(t, ns, "relay-2") })
	step("helm upgrade to another image", func() {
		values["image"].(map[string]any)["tag"] = os.Getenv("RELAY_TEST_K8S_NEXT_TAG")
		c.upgrade(t, cfg, ns, values)
	})
	for _, n := range []int{5, 2} {
		step("scale to "+strconv.Itoa(n), func() {
			values["replicas"] = n
			c.upgrade(t, cfg, ns, values)
		})
	}
	step("broker restart", func() { c.restartBroker(t) })
	time.Sleep(5 * time.Second) // a little load after the last fault

	acked := l.finish(t)
	c.drained(t, group, source, 6)
	c.outputs(t, source+".valid", l.sent)
	c.audit(t, source, group, acked)
	c.noRestarts(t, ns, c.readyPods(t, ns, relayPods))
	c.noLivenessFailures(t, ns)
	t.Logf("%d records produced through the faults", acked)
}

// noRestarts fails the test for any container of pods that restarted: a
// restart the test did not cause (checked after every step: a pod the next
// step replaces takes its count with it).
func (c *cluster) noRestarts(t *testing.T, ns string, pods []corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		for _, s := range p.Status.ContainerStatuses {
			if s.RestartCount != 0 {
				t.Errorf("%s/%s restarted %d times: a restart the test did not cause", p.Name, s.Name, s.RestartCount)
			}
		}
	}
}

// noLivenessFailures fails the test for any failed liveness probe in ns:
// relay's /livez fails only when its loop is stuck, and a pod cut off
// from the kubelet fails it too (as every pod did for most of a minute
// after a neighbour's delete, when the pods' bridge changed its MAC). A
// restart needs six in a row; one is already wrong.
func (c *cluster) noLivenessFailures(t *testing.T, ns string) {
	t.Helper()
	events, err := c.client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Unhealthy"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.HasPrefix(e.Message, "Liveness probe ") { // failed, errored
			t.Errorf("%s/%s: %s (%d times)", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message, e.Count)
		}
	}
}

// relayPods selects the StatefulSet's pods (not the hooks' or the tests').
const relayPods = "app.kubernetes.io/instance=relay,controller-revision-hash"

// deletePod deletes a pod (kubectl delete pod: its grace period) and waits
// until the StatefulSet has replaced it. relay's container must have
// exited 0 within the grace period (its in-flight transaction committed
// or aborted, its offsets handed over), not been killed at its end (137).
func (c *cluster) deletePod(t *testing.T, ns, name string) (deleted time.Time) {
	t.Helper()
	old := c.pod(t, ns, name)
	pw := c.watchPod(t, ns, old)
	defer pw.w.Stop()
	start := time.Now()
	if err := c.client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	limit := time.Duration(*old.Spec.TerminationGracePeriodSeconds)*time.Second + time.Minute
	pw.until(t, limit, name+" gone (a minute past its grace period)", func(ev watch.EventType, _ *corev1.Pod) bool {
		return ev == watch.Deleted
	})
	exit := pw.exit
	stopped := time.Since(start)
	c.replaced(t, ns, name, old.UID)
	t.Logf("%s: stopped in %s (exit %d, grace period %ds), replacement Ready %s after the delete",
		name, stopped.Round(100*time.Millisecond), exit, *old.Spec.TerminationGracePeriodSeconds, time.Since(start).Round(100*time.Millisecond))
	if exit != 0 {
		t.Errorf("%s: relay exited %d when deleted, not 0: the grace period did not cover its shutdown", name, exit)
	}
	return start
}

// evict asks the API to evict a pod, as a node drain does (the
// PodDisruptionBudget may refuse it for a while), and waits for its
// replacement.
func (c *cluster) evict(t *testing.T, ns, name string) {
	t.Helper()
	old := c.pod(t, ns, name).UID
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := c.client.PolicyV1().Evictions(ns).Evict(context.Background(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("evict %s: %v", name, err)
		}
		time.Sleep(2 * time.Second)
	}
	c.replaced(t, ns, name, old)
}

// kubeletEvicts fills a pod's tmp emptyDir past its sizeLimit (16Mi)
// from the node, as the pod's own writes would. The kubelet's eviction
// manager then evicts the pod for its local storage: no
// PodDisruptionBudget asked, a grace of one second (the runtime makes it
// the two it allows at least), an Evicted event saying why. The
// StatefulSet replaces it. relay may exit 0 or be killed in those two
// seconds; both are logged, neither is a failure.
func (c *cluster) kubeletEvicts(t *testing.T, ns, name string) {
	t.Helper()
	if c.kubeletDir == "" {
		t.Fatal("RELAY_TEST_K8S_KUBELET_DIR: the kubelet's root directory (make test-k8s sets it)")
	}
	old := c.pod(t, ns, name)
	pw := c.watchPod(t, ns, old)
	defer pw.w.Stop()
	fill(t, filepath.Join(c.kubeletDir, "pods", string(old.UID), "volumes", "kubernetes.io~empty-dir", "tmp", "fill"), 17<<20)
	start := time.Now()
	var phase corev1.PodPhase
	pw.until(t, 3*time.Minute, name+" stopped by the kubelet, its tmp volume over its limit", func(ev watch.EventType, p *corev1.Pod) bool {
		phase = p.Status.Phase
		return phase == corev1.PodFailed || phase == corev1.PodSucceeded || ev == watch.Deleted
	})
	stoppedIn := time.Since(start)
	// The eviction manager records why before it kills. The phase it sets,
	// Failed, holds only when a container failed: when relay exits 0 in its
	// two seconds, the kubelet reports the pod Succeeded.
	var evicted string
	eventually(t, time.Minute, name+"'s eviction event", func() bool {
		events, err := c.client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=Evicted,involvedObject.uid=" + string(old.UID)})
		if err != nil || len(events.Items) == 0 {
			return false
		}
		evicted = events.Items[0].Message
		return true
	})
	if !strings.Contains(evicted, `EmptyDir volume "tmp"`) {
		t.Errorf("%s evicted for another reason: %s", name, evicted)
	}
	c.replaced(t, ns, name, old.UID)
	exit := "not reported before the pod went"
	if pw.exit >= 0 {
		exit = strconv.Itoa(int(pw.exit))
	}
	t.Logf("%s: stopped by the kubelet %s after its volume filled (%q; phase %s, relay's exit %s), replacement Ready %s after",
		name, stoppedIn.Round(100*time.Millisecond), strings.TrimSpace(evicted), phase, exit, time.Since(start).Round(100*time.Millisecond))
}

// fill writes a file of n random bytes (no filesystem compresses them
// away) and checks that the disk holds them: the kubelet measures a
// volume by the blocks its files take, as du does.
func fill(t *testing.T, path string, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatalf("fill a pod's volume on the node: %v", err)
	}
	b := make([]byte, n)
	_, _ = rand.Read(b)
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 < int64(n) {
		t.Fatalf("%s takes %d bytes on disk, not the %d written", path, st.Blocks*512, n)
	}
}

// podWatch follows one pod, by its UID, from the version the test read;
// its caller stops it.
type podWatch struct {
	w    watch.Interface
	uid  types.UID
	exit int32 // relay's exit code as last seen, -1 before it exits
}

func (c *cluster) watchPod(t *testing.T, ns string, old *corev1.Pod) *podWatch {
	t.Helper()
	w, err := c.client.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=" + old.Name, ResourceVersion: old.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	return &podWatch{w: w, uid: old.UID, exit: -1}
}

// until reads the pod's events until done holds for one, and fails the
// test with what when limit passes first or the watch closes.
func (pw *podWatch) until(t *testing.T, limit time.Duration, what string, done func(watch.EventType, *corev1.Pod) bool) {
	t.Helper()
	timeout := time.After(limit)
	for {
		var ev watch.Event
		select {
		case ev = <-pw.w.ResultChan():
		case <-timeout:
			t.Fatalf("%s: not after %s", what, limit)
		}
		if ev.Type == "" {
			t.Fatalf("%s: the watch closed first", what)
		}
		if ev.Type == watch.Error {
			t.Fatalf("%s: the watch failed: %v", what, apierrors.FromObject(ev.Object))
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || p.UID != pw.uid {
			continue
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "relay" && s.State.Terminated != nil {
				pw.exit = s.State.Terminated.ExitCode
			}
		}
		if done(ev.Type, p) {
			return
		}
	}
}

func (c *cluster) pod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := c.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// replaced waits (up to three minutes) for a pod of that name with
// another UID to be Ready.
func (c *cluster) replaced(t *testing.T, ns, name string, old types.UID) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		p, err := c.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && p.UID != old {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					return
				}
			}
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("%s not replaced and Ready in three minutes", name)
}

// upgrade runs helm upgrade with values and waits for the rollout.
func (c *cluster) upgrade(t *testing.T, cfg *action.Configuration, ns string, values map[string]any) {
	t.Helper()
	ch, err := loader.Load("../helm/relay")
	if err != nil {
		t.Fatal(err)
	}
	up := action.NewUpgrade(cfg)
	up.Namespace, up.Wait, up.Timeout = ns, true, 8*time.Minute
	if _, err := up.Run("relay", ch, values); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
}

// restartBroker stops and starts the project's broker (its listener at
// the node's address kept: RELAY_STACK_KAFKA_NODE_ADDR).
func (c *cluster) restartBroker(t *testing.T) {
	t.Helper()
	script, err := filepath.Abs("../../scripts/stack/kafka.sh")
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("RELAY_STACK_KAFKA_NODE_ADDR") == "" {
		t.Fatal("RELAY_STACK_KAFKA_NODE_ADDR: without it the broker would come back without the pods' listener (make test-k8s sets it)")
	}
	if out, err := exec.Command(script, "restart").CombinedOutput(); err != nil {
		t.Fatalf("kafka.sh restart: %v\n%s", err, out)
	}
}
