package helm_test

import (
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scaledObject is KEDA's ScaledObject, in the fields the chart sets.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		PollingInterval *int32 `json:"pollingInterval"`
		CooldownPeriod  *int32 `json:"cooldownPeriod"`
		Advanced        struct {
			HorizontalPodAutoscalerConfig struct {
				Behavior autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior"`
			} `json:"horizontalPodAutoscalerConfig"`
		} `json:"advanced"`
		Triggers []struct {
			Type              string            `json:"type"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
	} `json:"spec"`
}

// KEDA scales the StatefulSet on the group's lag, a kafka trigger per
// source; the StatefulSet then leaves its replica count to KEDA's HPA,
// and the PodDisruptionBudget (maxUnavailable, relative to the current
// count) still lets a drain stop one pod at a time.
func TestChartKEDA(t *testing.T) {
	r, err := render(t, valuesFile(t, "keda.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.scaledObjects) != 1 {
		t.Fatalf("%d ScaledObjects, want 1", len(r.scaledObjects))
	}
	so := r.scaledObjects[0].Spec
	if ref := so.ScaleTargetRef; ref.APIVersion != "apps/v1" || ref.Kind != "StatefulSet" || ref.Name != r.statefulSet.Name {
		t.Errorf("scaleTargetRef %+v, want the StatefulSet %s", ref, r.statefulSet.Name)
	}
	if r.statefulSet.Spec.Replicas != nil {
		t.Errorf("the StatefulSet sets replicas %d beside KEDA's HPA", *r.statefulSet.Spec.Replicas)
	}
	if *so.MinReplicaCount != 2 || *so.MaxReplicaCount != 8 {
		t.Errorf("replicas %d to %d, want 2 to 8", *so.MinReplicaCount, *so.MaxReplicaCount)
	}
	if d := so.Advanced.HorizontalPodAutoscalerConfig.Behavior.ScaleDown; d == nil || d.StabilizationWindowSeconds == nil || *d.StabilizationWindowSeconds != 300 {
		t.Errorf("scale-down behaviour %+v", d)
	}
	var topics []string
	for _, tr := range so.Triggers {
		m := tr.Metadata
		if tr.Type != "kafka" || m["bootstrapServers"] != "kafka-0.kafka:9092" || m["consumerGroup"] != "relay" || m["lagThreshold"] != "1000" ||
			m["offsetResetPolicy"] != "earliest" || m["sasl"] != "scram_sha512" || tr.AuthenticationRef == nil || tr.AuthenticationRef.Name != "relay-kafka" {
			t.Errorf("trigger %+v", tr)
		}
		topics = append(topics, m["topic"])
	}
	if strings.Join(topics, ",") != "orders,payments" {
		t.Errorf("triggers on %v, want one per source", topics)
	}
	if len(r.pdbs) != 1 || r.pdbs[0].Spec.MaxUnavailable == nil || r.pdbs[0].Spec.MaxUnavailable.IntValue() != 1 || r.pdbs[0].Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget %+v: want maxUnavailable 1, which follows the HPA's count", r.pdbs)
	}

	for name, c := range map[string]struct {
		edit func(k map[string]any, v map[string]any)
		want string
	}{
		"no maxReplicaCount": {func(k, _ map[string]any) { delete(k, "maxReplicaCount") }, "keda.maxReplicaCount is required"},
		"no partition count": {func(_, v map[string]any) { v["sourcePartitions"] = map[string]any{"orders": 8} },
			"needs sourcePartitions.payments"},
		"more pods than partitions": {func(k, _ map[string]any) { k["maxReplicaCount"] = 9 }, "above the source topics' partition count (8"},
		"min above max":             {func(k, _ map[string]any) { k["minReplicaCount"] = 5; k["maxReplicaCount"] = 4 }, "above keda.maxReplicaCount"},
		"a trigger field the chart sets": {func(k, _ map[string]any) { k["triggerMetadata"] = map[string]any{"topic": "x"} },
			"keda.triggerMetadata.topic"},
	} {
		t.Run(name, func(t *testing.T) {
			v := valuesFile(t, "keda.yaml")
			c.edit(v["keda"].(map[string]any), v)
			if _, err := render(t, v); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v; want an error saying %q", err, c.want)
			}
		})
	}
}
