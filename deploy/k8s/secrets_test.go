package k8s

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// relay's hook token from a Secret (secretFiles), mounted read-only and
// rotated by updating the Secret, under load: the calls before carry the
// old token, every relay pod reads the new file (its log says so) with
// no restart, and every call after carries the new token (the hook
// refuses the old one from then on, and counts it). Then, with the hook
// holding relay-0's calls 6 s, relay-0 is deleted while one is in
// flight: relay finishes it (the hook answered it, none given up on),
// commits (no later call for that record) and exits 0 within the grace
// period the chart derives, and the replacement's first commit is
// measured. Throughout, every record is processed exactly once, in key
// order (the witness, relay audit).
func TestSecretRotationAndAStopWithCallsInFlight(t *testing.T) {
	c := newCluster(t)
	d := c.deployment(t, "secrets", 4, 2)
	ns, source, group, values := d.ns, d.source, d.group, d.values
	ctx := context.Background()

	oldToken, newToken := secretToken(t), secretToken(t)
	h := c.hook(t, oldToken)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "relay-hook"}, StringData: map[string]string{"token": oldToken}}
	if _, err := c.client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	frame := loadSchema(t, source)
	values["relay"].(map[string]any)["env"] = map[string]any{
		// The hook reads the decoded record: the registry, reached
		// through the node's address.
		"RELAY_SCHEMA_REGISTRY_URL": c.registryForPods(t),
		"RELAY_SCHEMA_SUBJECT":      source + "-value",
		"RELAY_SCHEMA_ACCEPT":       "1",
		"RELAY_HOOK_URL":            h.url,
		// The hook holds calls 6 s below; a graceful stop must fit
		// RELAY_SHUTDOWN_TIMEOUT (30 s in the chart): 2 × 8 s in place
		// and two Kafka calls.
		"RELAY_HOOK_TIMEOUT":        "8s",
		"RELAY_BLOCKING_ATTEMPTS":   "1",
		"RELAY_ALLOW_INSECURE_HTTP": "true", // the token in clear to the node's address: the test's own network
	}
	values["secretFiles"] = []any{map[string]any{"secret": "relay-hook", "keys": map[string]any{"RELAY_HOOK_TOKEN": "token"}}}
	c.install(t, d.cfg, ns, "relay", values)
	pods := c.readyPods(t, ns, relayPods)
	for _, p := range pods {
		mountedReadOnly(t, p, "relay-hook")
	}

	// The old token.
	l := c.startSchemaLoad(t, source, 20, 100, frame)
	c.waitAcked(t, l, 1000)
	before := l.finish(t)
	c.drained(t, group, source, 4)
	for _, p := range pods {
		if h.calls(p.Status.PodIP, oldToken) == 0 {
			t.Fatalf("%s made no call with the token it was given: %s", p.Name, h.seen())
		}
	}

	// The Secret updated: from now on the hook refuses the old token.
	h.accept.Store(newToken)
	secret.StringData = map[string]string{"token": newToken}
	if _, err := c.client.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	for _, p := range pods {
		eventually(t, 3*time.Minute, p.Name+" logs that it read RELAY_HOOK_TOKEN_FILE again", func() bool {
			return c.logged(ns, p.Name, "relay", "secret file changed; read again", "RELAY_HOOK_TOKEN")
		})
	}
	t.Logf("the rotated token read by every pod %s after the Secret's update", time.Since(rotated).Round(time.Second))

	l = c.resume(t, l, 100)
	c.waitAcked(t, l, 1000)
	for _, p := range pods {
		eventually(t, time.Minute, p.Name+" calls with the new token", func() bool { return h.calls(p.Status.PodIP, newToken) > 0 })
	}
	c.samePods(t, ns, pods)
	if n := h.refused.Load(); n != 0 {
		t.Fatalf("the hook refused %d calls with a token other than the one in the Secret: %s", n, h.seen())
	}

	// relay-0 deleted with calls in flight (each held 6 s by the hook).
	victim := c.pod(t, ns, "relay-0")
	h.hold(victim.Status.PodIP, 6*time.Second)
	eventually(t, time.Minute, "a call of relay-0 held", func() bool { return h.holdingNow() > 0 })
	deleted := c.deletePod(t, ns, "relay-0")
	h.hold("", 0) // the replacement may get the address again
	held := h.heldCalls()
	var across []heldCall // in flight at the delete, answered
	for _, call := range held {
		switch {
		case !call.end.IsZero() && !call.answered:
			t.Errorf("relay gave up on its hook call for %s when stopped: it should finish it and commit", call.key)
		case call.answered && call.start.Before(deleted) && call.end.After(deleted):
			across = append(across, call)
		}
	}
	if len(across) == 0 {
		t.Fatalf("no held call was in flight at the delete and answered: %+v", held)
	}
	t.Logf("relay-0: %d of its calls held 6 s each by the hook, %d in flight at the delete, all answered", len(held), len(across))
	c.firstCommit(t, ns, "relay-0", deleted)

	time.Sleep(5 * time.Second) // load after the replacement
	acked := before + l.finish(t)
	c.drained(t, group, source, 4)
	c.outputs(t, source+".valid", l.sent)
	c.audit(t, source, group, acked)
	if n := h.refused.Load(); n != 0 {
		t.Fatalf("the hook refused %d calls: %s", n, h.seen())
	}
	// What relay-0 finished as it stopped, it committed: no one called
	// the hook for those records again.
	for _, call := range across {
		if n := h.callsFor(call.key); n != 1 {
			t.Errorf("the hook was called %d times for %s, whose call was answered as relay-0 stopped: its transaction did not commit", n, call.key)
		}
	}
	c.noLivenessFailures(t, ns)
	t.Logf("%d records before the rotation, %d in all", before, acked)
}

func secretToken(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// mountedReadOnly fails the test unless relay's container mounts the
// Secret whole (no subPath: a subPath never sees an update) and
// read-only.
func mountedReadOnly(t *testing.T, p corev1.Pod, secret string) {
	t.Helper()
	volumes := map[string]bool{}
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secret {
			volumes[v.Name] = true
		}
	}
	for _, ctr := range p.Spec.Containers {
		if ctr.Name != "relay" {
			continue
		}
		for _, m := range ctr.VolumeMounts {
			if volumes[m.Name] {
				if !m.ReadOnly || m.SubPath != "" {
					t.Fatalf("%s mounts the Secret %s read-only=%v subPath=%q", p.Name, secret, m.ReadOnly, m.SubPath)
				}
				return
			}
		}
	}
	t.Fatalf("%s does not mount the Secret %s", p.Name, secret)
}

// samePods fails the test if any of pods was replaced or restarted.
func (c *cluster) samePods(t *testing.T, ns string, pods []corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		now := c.pod(t, ns, p.Name)
		if now.UID != p.UID {
			t.Fatalf("%s was replaced", p.Name)
		}
		c.noRestarts(t, ns, []corev1.Pod{*now})
	}
}

// firstCommit waits for the first committed transaction of the pod that
// replaced name (relay_transactions_committed_total on its metrics port),
// and logs how long after deleted it came.
func (c *cluster) firstCommit(t *testing.T, ns, name string, deleted time.Time) {
	t.Helper()
	p := c.pod(t, ns, name)
	url := "http://" + p.Status.PodIP + ":9464/metrics"
	client := &http.Client{Timeout: 5 * time.Second}
	var at time.Time
	eventually(t, 3*time.Minute, name+"'s replacement commits", func() bool {
		if committed(client, url) > 0 {
			at = time.Now()
			return true
		}
		return false
	})
	t.Logf("%s: the replacement's first commit %s after the delete (its Ready: %s)", name,
		at.Sub(deleted).Round(100*time.Millisecond), readySince(p).Sub(deleted).Round(100*time.Millisecond))
}

func readySince(p *corev1.Pod) time.Time {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// committed reads relay_transactions_committed_total from a pod's
// metrics, 0 when it cannot.
func committed(client *http.Client, url string) float64 {
	resp, err := client.Get(url) //nolint:noctx // the test's own pod
	if err != nil {
		return 0
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "relay_transactions_committed_total "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
