// Package k8s holds the tests of make test-k8s: relay's chart, installed
// by Helm's SDK into the real single-node Kubernetes of scripts/k8s
// (kubelet, containerd, runc), with relay's own image, against the
// project's broker on the host (reached from the pods at the node's
// address). They skip unless make test-k8s runs them (RELAY_TEST_K8S=1).
package k8s

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// cluster is what make test-k8s gives the tests.
type cluster struct {
	kubeconfig string
	image      string // registry/repository:tag, imported into the node
	kafka      string // the broker's listener at the node's address
	hostKafka  string // the same broker from the host
	node       string // the node's address, where the pods reach the host
	kubeletDir string // the kubelet's root directory, on this machine
	client     *kubernetes.Clientset
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	if os.Getenv("RELAY_TEST_K8S") != "1" {
		t.Skip("make test-k8s runs this against the cluster of scripts/k8s")
	}
	c := &cluster{
		kubeconfig: os.Getenv("RELAY_TEST_K8S_KUBECONFIG"),
		image:      os.Getenv("RELAY_TEST_K8S_IMAGE"),
		kafka:      os.Getenv("RELAY_TEST_K8S_KAFKA"),
		hostKafka:  os.Getenv("RELAY_TEST_BOOTSTRAP"),
		node:       os.Getenv("RELAY_TEST_K8S_NODE_IP"),
		kubeletDir: os.Getenv("RELAY_TEST_K8S_KUBELET_DIR"),
	}
	if c.hostKafka == "" {
		c.hostKafka = "127.0.0.1:9092"
	}
	if c.kubeconfig == "" || c.image == "" || c.kafka == "" {
		t.Fatal("RELAY_TEST_K8S_KUBECONFIG, RELAY_TEST_K8S_IMAGE and RELAY_TEST_K8S_KAFKA are required (make test-k8s sets them)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if c.client, err = kubernetes.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	return c
}

// namespace makes a namespace that enforces the restricted Pod Security
// Standard (the API server's admission plugin), deleted at the end.
func (c *cluster) namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if _, err := c.client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.dump(t, name)
		}
		_ = c.client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// dump logs what a failed test needs to see: the namespace's pods, their
// containers' states, and the last lines of their logs.
func (c *cluster) dump(t *testing.T, ns string) {
	ctx := context.Background()
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("pods of %s: %v", ns, err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("pod %s: %s", p.Name, p.Status.Phase)
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			t.Logf("  %s ready=%v restarts=%d state=%+v", s.Name, s.Ready, s.RestartCount, s.State)
			tail := int64(20)
			b, _ := c.client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: s.Name, TailLines: &tail}).DoRaw(ctx)
			t.Logf("  log:\n%s", b)
		}
	}
	events, _ := c.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if events != nil {
		for _, e := range events.Items {
			if e.Type != corev1.EventTypeNormal {
				t.Logf("event %s/%s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
}

// helm is Helm's SDK on ns, with its log in the test's.
func (c *cluster) helm(t *testing.T, ns string) *action.Configuration {
	t.Helper()
	settings := cli.New()
	settings.KubeConfig = c.kubeconfig
	settings.SetNamespace(ns)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret", func(format string, v ...any) {}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// values are the chart's values for this cluster: the imported image
// (never pulled), the broker at the node's address, the topics Job.
func (c *cluster) values(source, group string, replicas int) map[string]any {
	ref, tag, _ := strings.Cut(c.image[strings.LastIndex(c.image, "/")+1:], ":")
	registry := c.image[:strings.LastIndex(c.image, "/")]
	return map[string]any{
		"image":     map[string]any{"registry": registry, "repository": ref, "tag": tag, "pullPolicy": "Never"},
		"replicas":  replicas,
		"relay":     map[string]any{"sourceTopics": source, "groupId": group},
		"kafka":     map[string]any{"bootstrapServers": c.kafka},
		"topicsJob": map[string]any{"enabled": true, "replicationFactor": 1},
	}
}

// install installs the chart as release name and waits for every pod.
func (c *cluster) install(t *testing.T, cfg *action.Configuration, ns, name string, values map[string]any) *release.Release {
	t.Helper()
	ch, err := loader.Load("../helm/relay")
	if err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace = name, ns
	in.Wait, in.Timeout = true, 5*time.Minute
	rel, err := in.Run(ch, values)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	return rel
}

// deployment is one test's release: its namespace, Helm's configuration
// on it, its source topic (made), its group, and the values to install.
type deployment struct {
	ns, source, group string
	cfg               *action.Configuration
	values            map[string]any
}

// deployment makes a namespace and a source topic of partitions for a
// release of replicas, named after name; install installs it.
func (c *cluster) deployment(t *testing.T, name string, partitions, replicas int) *deployment {
	t.Helper()
	d := &deployment{ns: c.namespace(t, uniq("relay-"+name)), source: uniq("k8s-" + name), group: uniq("k8s-" + name + "-group")}
	d.cfg = c.helm(t, d.ns)
	c.topic(t, d.source, partitions)
	d.values = c.values(d.source, d.group, replicas)
	return d
}

func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
}

// topic creates a source topic on the broker, from the host (relay's
// topics Job creates relay's own topics, never the sources).
func (c *cluster) topic(t *testing.T, name string, partitions int) {
	t.Helper()
	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": c.hostKafka})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := admin.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: name, NumPartitions: partitions, ReplicationFactor: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Error.Code() != kafka.ErrNoError {
		t.Fatalf("create %s: %v", name, res[0].Error)
	}
}

// rolled waits (up to five minutes) until the StatefulSet's pods all run
// its current revision and are Ready.
func (c *cluster) rolled(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, 5*time.Minute, "statefulset "+name+" rolled out", func() bool {
		s, err := c.client.AppsV1().StatefulSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := s.Status
		return st.ObservedGeneration >= s.Generation && st.UpdateRevision == st.CurrentRevision &&
			st.UpdatedReplicas == *s.Spec.Replicas && st.ReadyReplicas == *s.Spec.Replicas
	})
}

// waitAcked waits until the load has n acknowledged records.
func (c *cluster) waitAcked(t *testing.T, l *load, n int64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for l.acked.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records acknowledged in two minutes", l.acked.Load(), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
