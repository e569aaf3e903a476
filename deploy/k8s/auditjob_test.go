package k8s

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The audit CronJob, its Job triggered once as `kubectl create job
// --from=cronjob/...` does: relay audit runs in the cluster under the
// restricted profile over records relay relayed, exits 0 (the Job
// succeeds), and pushes its result to a Pushgateway (Prometheus' own,
// on the node) as job relay_audit: clean, outcome clean.
func TestAuditCronJobRunsAndPushes(t *testing.T) {
	c := newCluster(t)
	gateway := c.pushgateway(t)
	d := c.deployment(t, "audit", 2, 2)
	d.values["audit"] = map[string]any{"enabled": true, "source": d.source, "pushURL": gateway, "window": "1h"}
	c.install(t, d.cfg, d.ns, "relay", d.values)
	c.readyPods(t, d.ns, relayPods)
	l := c.startLoad(t, d.source, 10, 100)
	c.waitAcked(t, l, 300)
	acked := l.finish(t)
	c.drained(t, d.group, d.source, 2)

	ctx := context.Background()
	cj, err := c.client.BatchV1().CronJobs(d.ns).Get(ctx, "relay-audit", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The schedule's own run must not move the audit's cursor meanwhile.
	suspend := true
	cj.Spec.Suspend = &suspend
	if cj, err = c.client.BatchV1().CronJobs(d.ns).Update(ctx, cj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "relay-audit-once", Namespace: d.ns,
		Annotations: map[string]string{"cronjob.kubernetes.io/instantiate": "manual"}}, Spec: cj.Spec.JobTemplate.Spec}
	if _, err := c.client.BatchV1().Jobs(d.ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		j, err := c.client.BatchV1().Jobs(d.ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if j.Status.Succeeded > 0 {
			break
		}
		if j.Status.Failed > 0 || time.Now().After(deadline) {
			t.Fatalf("the audit Job did not succeed: %+v", j.Status)
		}
		time.Sleep(2 * time.Second)
	}

	// The audit's pods are no instance of relay's: the disruption budget
	// still counts relay's two (a Job's pods in it stop it: "jobs.batch
	// does not implement the scale subresource").
	pdb, err := c.client.PolicyV1().PodDisruptionBudgets(d.ns).Get(ctx, "relay", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pdb.Status.ExpectedPods != 2 {
		t.Errorf("the PodDisruptionBudget expects %d pods, want 2: %+v", pdb.Status.ExpectedPods, pdb.Status.Conditions)
	}
	events, err := c.client.CoreV1().Events(d.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=PodDisruptionBudget"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Type != "Normal" {
			t.Errorf("the PodDisruptionBudget: %s %s", e.Reason, e.Message)
		}
	}

	resp, err := http.Get(gateway + "/metrics") //nolint:gosec,noctx // the test's own gateway
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf(`relay_audit_clean{instance="",job="relay_audit",source=%q} 1`, d.source),
		fmt.Sprintf(`relay_audit_outcome{instance="",job="relay_audit",outcome="clean",source=%q} 1`, d.source),
		fmt.Sprintf(`relay_audit_records{instance="",job="relay_audit",source=%q,state="processed"} %d`, d.source, acked),
		fmt.Sprintf(`relay_audit_findings{instance="",job="relay_audit",kind="unverifiable",source=%q} 0`, d.source),
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the Pushgateway has no %s; its relay_audit lines:\n%s", want, grep(string(b), "relay_audit"))
		}
	}
}

// pushgateway starts Prometheus' Pushgateway on the node's address (the
// pods reach it there), stopped when the test ends, and returns its URL.
func (c *cluster) pushgateway(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("RELAY_TEST_K8S_PUSHGATEWAY")
	if bin == "" {
		t.Fatal("RELAY_TEST_K8S_PUSHGATEWAY (make test-k8s sets it)")
	}
	// The port is chosen here and given to the gateway, which binds it
	// again: a port taken in between fails its start, and the test says so.
	l, err := net.Listen("tcp", net.JoinHostPort(c.nodeIP(t), "0"))
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(bin, "--web.listen-address="+addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // not left behind by a test binary that dies
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	url := "http://" + addr
	for i := 0; ; i++ {
		select {
		case <-exited:
			t.Fatalf("the Pushgateway on %s exited: %v", addr, waitErr)
		default:
		}
		if resp, err := http.Get(url + "/-/ready"); err == nil { //nolint:gosec,noctx // the test's own gateway
			_ = resp.Body.Close()
			return url
		}
		if i == 100 {
			t.Fatalf("the Pushgateway at %s is not ready", url)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
