package helm_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"relay/internal/topics"
)

// kafkaTopic is Strimzi's KafkaTopic, in the fields the chart sets.
type kafkaTopic struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		TopicName  string            `json:"topicName"`
		Partitions int               `json:"partitions"`
		Replicas   int               `json:"replicas"`
		Config     map[string]string `json:"config"`
	} `json:"spec"`
}

// kafkaUser is Strimzi's KafkaUser, in the fields the chart sets.
type kafkaUser struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Authentication struct {
			Type string `json:"type"`
		} `json:"authentication"`
		Authorization struct {
			Type string       `json:"type"`
			ACLs []strimziACL `json:"acls"`
		} `json:"authorization"`
	} `json:"spec"`
}

type strimziACL struct {
	Resource struct {
		Type        string `json:"type"`
		Name        string `json:"name,omitempty"`
		PatternType string `json:"patternType,omitempty"`
	} `json:"resource"`
	Operations []string `json:"operations"`
	Host       string   `json:"host"`
}

// strimziVariants are settings that change relay's topic set: the
// defaults, templates without a tier prefix, partition ordering (no tier
// topics), no tiers, and strimzi.yaml's own.
var strimziVariants = map[string]func(v map[string]any){
	"strimzi.yaml": func(map[string]any) {},
	"defaults": func(v map[string]any) {
		v["relay"] = map[string]any{"sourceTopics": "orders,payments"}
		v["kafka"] = map[string]any{"bootstrapServers": "kafka:9092"}
		v["secretFiles"] = []any{}
		v["sourcePartitions"] = map[string]any{"orders": 6, "payments": 9}
		v["replicas"] = 1
	},
	"a tier template that starts with the delay": func(v map[string]any) {
		v["relay"].(map[string]any)["env"] = map[string]any{"RELAY_RETRY_TOPIC": "{delay}.{group}.{topic}.retry", "RELAY_QUARANTINE_TOPIC": "dlq.{group}.{topic}",
			"RELAY_RETRY_MAX_ELAPSED": "1.5h"}
	},
	"partition ordering": func(v map[string]any) {
		v["relay"].(map[string]any)["env"] = map[string]any{"RELAY_ORDERING": "partition", "RELAY_RETRY_TIERS": "1m,10m"}
	},
	"no tiers": func(v map[string]any) {
		v["relay"].(map[string]any)["env"] = map[string]any{"RELAY_RETRY_TIERS": "", "RELAY_ORDERING": "unordered", "RELAY_OUTPUT_RETENTION": "2h45m30s"}
	},
	"KEDA": func(v map[string]any) {
		v["keda"] = map[string]any{"enabled": true, "maxReplicaCount": 12}
	},
}

func strimziValues(t *testing.T, edit func(v map[string]any)) *rendered {
	t.Helper()
	v := valuesFile(t, "strimzi.yaml")
	edit(v)
	r, err := render(t, v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The KafkaTopics are relay's plan (topics.Plan, what `relay topics
// apply` creates) for the same environment and source partitions: each
// topic, its partitions and its configuration; under the cluster's label,
// with names Kubernetes takes.
func TestChartStrimziTopicsMatchPlan(t *testing.T) {
	for name, edit := range strimziVariants {
		t.Run(name, func(t *testing.T) {
			r := strimziValues(t, edit)
			cfg, err := relayConfig(t, "StatefulSet", &r.statefulSet.Spec.Template)
			if err != nil {
				t.Fatal(err)
			}
			v := valuesFile(t, "strimzi.yaml")
			edit(v)
			parts := map[string]int{}
			for src, n := range v["sourcePartitions"].(map[string]any) {
				parts[src], _ = strconv.Atoi(fmt.Sprint(n))
			}
			want := map[string]topics.Spec{}
			for _, s := range topics.Plan(cfg, parts) {
				want[s.Name] = s
			}
			got := map[string]bool{}
			names := map[string]bool{}
			for _, kt := range r.kafkaTopics {
				s, ok := want[kt.Spec.TopicName]
				if !ok {
					t.Errorf("KafkaTopic %s: relay needs no topic %q", kt.Name, kt.Spec.TopicName)
					continue
				}
				got[kt.Spec.TopicName] = true
				// What `relay topics apply --replication-factor 3` creates.
				conf := maps.Clone(s.Configs)
				conf["min.insync.replicas"] = strconv.Itoa(topics.MinInsyncFor(3))
				if kt.Spec.Partitions != s.Partitions || !maps.Equal(kt.Spec.Config, conf) || kt.Spec.Replicas != 3 {
					t.Errorf("KafkaTopic %s: partitions %d, config %v, replicas %d; relay plans %d, %v",
						kt.Name, kt.Spec.Partitions, kt.Spec.Config, kt.Spec.Replicas, s.Partitions, conf)
				}
				// Helm never deletes a topic: not at uninstall, not when it
				// leaves relay's configuration (a retired tier may hold
				// records).
				if kt.APIVersion != "kafka.strimzi.io/v1" || kt.Annotations["helm.sh/resource-policy"] != "keep" {
					t.Errorf("KafkaTopic %s: apiVersion %s, annotations %v; want kafka.strimzi.io/v1, helm.sh/resource-policy: keep",
						kt.Name, kt.APIVersion, kt.Annotations)
				}
				if kt.Labels["strimzi.io/cluster"] != "my-cluster" {
					t.Errorf("KafkaTopic %s: labels %v", kt.Name, kt.Labels)
				}
				if errs := validation.IsDNS1123Subdomain(kt.Name); len(errs) > 0 || names[kt.Name] {
					t.Errorf("KafkaTopic name %q: %v (or a second one)", kt.Name, errs)
				}
				names[kt.Name] = true
			}
			for n := range want {
				if !got[n] {
					t.Errorf("no KafkaTopic for %s (%s)", n, want[n].Role)
				}
			}
		})
	}
}

// aclKey is an ACL as a set member: what it allows, not why.
func aclKey(resource, name string, prefixed bool, op string) string {
	return fmt.Sprintf("%s %s prefixed=%t %s", resource, name, prefixed, op)
}

// The KafkaUser's ACLs are exactly those topics.ACLs (what `relay topics
// acls` prints) gives for the same settings and commands, relay run's
// transactional id once per pod the StatefulSet may run: they cannot
// drift from relay's own list.
func TestChartStrimziACLsMatchRelay(t *testing.T) {
	for name, edit := range strimziVariants {
		for _, cmds := range [][]string{{"run", "audit", "console"}, topics.Commands, {"run"}} {
			t.Run(name+"/"+strings.Join(cmds, ","), func(t *testing.T) {
				r := strimziValues(t, func(v map[string]any) {
					edit(v)
					v["strimzi"].(map[string]any)["user"] = map[string]any{"commands": toAny(cmds)}
				})
				cfg, err := relayConfig(t, "StatefulSet", &r.statefulSet.Spec.Template)
				if err != nil {
					t.Fatal(err)
				}
				pods := 3 // strimzi.yaml's replicas
				if _, keda := r.scaledObjectsByName()["relay"]; keda {
					pods = 12
				} else if r.statefulSet.Spec.Replicas != nil {
					pods = int(*r.statefulSet.Spec.Replicas)
				}
				want := map[string]bool{}
				for _, cmd := range cmds {
					for i := range pods {
						cfg.TransactionalID = fmt.Sprintf("%s-relay-%d", cfg.GroupID, i)
						acls, err := topics.ACLs(cfg, cmd)
						if err != nil {
							t.Fatal(err)
						}
						for _, a := range acls {
							want[aclKey(a.Resource, a.Name, a.Prefixed, a.Operation)] = true
						}
					}
				}
				if len(r.kafkaUsers) != 1 {
					t.Fatalf("%d KafkaUsers, want 1", len(r.kafkaUsers))
				}
				u := r.kafkaUsers[0]
				if u.Name != "relay" || u.Labels["strimzi.io/cluster"] != "my-cluster" || u.Spec.Authentication.Type != "scram-sha-512" || u.Spec.Authorization.Type != "simple" {
					t.Errorf("KafkaUser %s, labels %v, spec %+v", u.Name, u.Labels, u.Spec)
				}
				resources := map[string]string{"topic": "Topic", "group": "Group", "transactionalId": "TransactionalId", "cluster": "Cluster"}
				got := map[string]bool{}
				for _, a := range u.Spec.Authorization.ACLs {
					name, pattern := a.Resource.Name, a.Resource.PatternType
					if a.Resource.Type == "cluster" {
						name, pattern = "kafka-cluster", "literal" // Strimzi names no cluster
					}
					if a.Host != "*" || (pattern != "literal" && pattern != "prefix") || resources[a.Resource.Type] == "" {
						t.Errorf("ACL %+v", a)
					}
					for _, op := range a.Operations {
						k := aclKey(resources[a.Resource.Type], name, pattern == "prefix", op)
						if got[k] {
							t.Errorf("ACL %s twice", k)
						}
						got[k] = true
					}
				}
				for k := range want {
					if !got[k] {
						t.Errorf("the KafkaUser lacks %s, which relay needs", k)
					}
				}
				for k := range got {
					if !want[k] {
						t.Errorf("the KafkaUser grants %s, which relay does not list", k)
					}
				}
			})
		}
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func (r *rendered) scaledObjectsByName() map[string]scaledObject {
	m := map[string]scaledObject{}
	for _, s := range r.scaledObjects {
		m[s.Name] = s
	}
	return m
}

// The duration parser behind the retentions reads what Go's does.
func TestChartStrimziRetentions(t *testing.T) {
	for in, ms := range map[string]string{"720h": "2592000000", "1h30m": "5400000", "1.5s": "1500", "90s": "90000", "2h45m30s": "9930000", "250ms": "250"} {
		r := strimziValues(t, func(v map[string]any) {
			v["relay"].(map[string]any)["env"] = map[string]any{"RELAY_OUTPUT_RETENTION": in}
		})
		i := slices.IndexFunc(r.kafkaTopics, func(k kafkaTopic) bool { return k.Spec.TopicName == "orders.valid" })
		if i < 0 || r.kafkaTopics[i].Spec.Config["retention.ms"] != ms {
			t.Errorf("RELAY_OUTPUT_RETENTION=%s: %+v, want retention.ms %s", in, r.kafkaTopics, ms)
		}
	}
}

// The operators' KafkaUser: its own principal, with the ACLs of the
// commands people run by hand (quarantine, replay, audit), beside relay's.
func TestOperatorsKafkaUser(t *testing.T) {
	v := valuesFile(t, "strimzi.yaml")
	v["strimzi"].(map[string]any)["operators"] = map[string]any{"enabled": true}
	r, err := render(t, v)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.kafkaUsers) != 2 {
		t.Fatalf("%d KafkaUsers, want relay's and the operators'", len(r.kafkaUsers))
	}
	ops := r.kafkaUsers[1]
	if ops.Name != "relay-ops" || ops.Name == r.kafkaUsers[0].Name {
		t.Errorf("the operators' user is %q (relay's %q)", ops.Name, r.kafkaUsers[0].Name)
	}
	var groups, txn int
	for _, a := range ops.Spec.Authorization.ACLs {
		switch a.Resource.Type {
		case "group":
			groups++
		case "transactionalId":
			txn++
		}
	}
	if len(ops.Spec.Authorization.ACLs) == 0 || groups == 0 {
		t.Errorf("the operators' ACLs: %+v", ops.Spec.Authorization.ACLs)
	}
}
