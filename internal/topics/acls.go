package topics

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
)

// ACL is one permission a relay command needs: Operation on a resource,
// allowed for relay's principal from any host.
type ACL struct {
	Resource  string `json:"resource"`  // Topic, Group, TransactionalId, Cluster
	Name      string `json:"name"`      // "kafka-cluster" for the cluster
	Prefixed  bool   `json:"prefixed"`  // the name is a prefix (PREFIXED pattern), else LITERAL
	Operation string `json:"operation"` // Read, Write, Describe, DescribeConfigs, Create, Alter, AlterConfigs
	Why       string `json:"why"`
	// Optional: without it relay warns and goes on without what it gives.
	Optional bool `json:"optional"`
}

var aclOps = map[string]kafka.ACLOperation{
	"Read": kafka.ACLOperationRead, "Write": kafka.ACLOperationWrite, "Describe": kafka.ACLOperationDescribe,
	"DescribeConfigs": kafka.ACLOperationDescribeConfigs, "Create": kafka.ACLOperationCreate,
	"Alter": kafka.ACLOperationAlter, "AlterConfigs": kafka.ACLOperationAlterConfigs,
}

// resourceTransactionalID is librdkafka's RD_KAFKA_RESOURCE_TRANSACTIONAL_ID,
// which the Go client does not name.
const resourceTransactionalID kafka.ResourceType = 5

var aclResources = map[string]kafka.ResourceType{
	"Topic": kafka.ResourceTopic, "Group": kafka.ResourceGroup, "TransactionalId": resourceTransactionalID, "Cluster": kafka.ResourceBroker,
}

// Binding is the ACL, allowed for principal ("User:relay") from any host,
// as the admin API takes it.
func (a ACL) Binding(principal string) kafka.ACLBinding {
	pattern := kafka.ResourcePatternTypeLiteral
	if a.Prefixed {
		pattern = kafka.ResourcePatternTypePrefixed
	}
	return kafka.ACLBinding{Type: aclResources[a.Resource], Name: a.Name, ResourcePatternType: pattern, Principal: principal, Host: "*",
		Operation: aclOps[a.Operation], PermissionType: kafka.ACLPermissionTypeAllow}
}

// Command is the kafka-acls.sh command that grants the ACL to principal.
func (a ACL) Command(principal string) string {
	var res string
	switch a.Resource {
	case "Topic":
		res = "--topic " + a.Name
	case "Group":
		res = "--group " + a.Name
	case "TransactionalId":
		res = "--transactional-id " + a.Name
	case "Cluster":
		res = "--cluster"
	}
	pattern := ""
	if a.Prefixed {
		pattern = " --resource-pattern-type prefixed"
	}
	return fmt.Sprintf("kafka-acls.sh --bootstrap-server $BOOTSTRAP --add --allow-principal %s --operation %s %s%s", principal, a.Operation, res, pattern)
}

func (a ACL) String() string {
	pattern := "literal"
	if a.Prefixed {
		pattern = "prefixed"
	}
	return fmt.Sprintf("%s %s %q %s", a.Operation, pattern, a.Name, a.Resource)
}

// Commands that need ACLs of their own, as ACLs takes them.
var Commands = []string{"run", "topics", "quarantine", "replay", "audit", "console"}

// ACLs lists the least a principal needs to run command (one of Commands)
// with cfg: each topic by its own name, the groups and the transactional
// ids of the operator commands by the prefix RELAY_GROUP_ID (every group
// id relay uses starts with it), the instance's transactional id by its
// name. Read, Write and Alter imply Describe, so Describe is listed only
// where nothing else is needed.
func ACLs(cfg *config.Config, command string) ([]ACL, error) {
	var out []ACL
	add := func(resource, name string, prefixed bool, why string, ops ...string) {
		for _, op := range ops {
			out = append(out, ACL{Resource: resource, Name: name, Prefixed: prefixed, Operation: op, Why: why})
		}
	}
	topic := func(name, why string, ops ...string) { add("Topic", name, false, why, ops...) }
	optional := func(resource, name, why, op string) {
		out = append(out, ACL{Resource: resource, Name: name, Operation: op, Why: why, Optional: true})
	}
	group := func(why string, ops ...string) { add("Group", cfg.GroupID, true, why, ops...) }
	state := cfg.StateTopicName()
	switch command {
	case "run":
		durable := "its min.insync.replicas, which the start-up check of RELAY_TOPICS_DURABILITY reads"
		for _, src := range cfg.SourceTopics {
			d := cfg.Derived(src)
			topic(src, "the source", "Read")
			optional("Topic", src, "its cleanup.policy (parking is refused on a compacted source) and "+durable, "DescribeConfigs")
			topic(d.Output, "the output", "Write")
			optional("Topic", d.Output, durable, "DescribeConfigs")
			for _, tier := range d.Tiers {
				if !cfg.WaitsInPlace() {
					topic(tier, "a retry tier: written and read back", "Read", "Write")
					optional("Topic", tier, durable, "DescribeConfigs")
				}
			}
			topic(d.Quarantine, "the quarantine", "Write")
			optional("Topic", d.Quarantine, "its retention.ms, for the retention headroom metric and the warning of a retention shorter than the objective, and "+durable, "DescribeConfigs")
			topic(d.Rejected, "business rejections", "Write")
			optional("Topic", d.Rejected, durable, "DescribeConfigs")
			topic(d.Replay, "what relay replay publishes", "Read")
			optional("Topic", d.Replay, durable, "DescribeConfigs")
		}
		topic(state, "the state topic: key ordering and the quarantine ledger", "Read", "Write")
		optional("Topic", state, durable, "DescribeConfigs")
		group("the consumer group (and relay's readers, named after it)", "Read")
		add("TransactionalId", cfg.TransactionalID, false, "the instance's transactions", "Write")
		optional("Cluster", "kafka-cluster", "the brokers' transaction.max.timeout.ms, which relay's transaction timeout is fitted to, and offset.metadata.max.bytes, which bounds key ordering's parked sets", "DescribeConfigs")
	case "topics":
		for _, src := range cfg.SourceTopics {
			d := cfg.Derived(src)
			topic(src, "the source's partitions", "Describe")
			for _, name := range append([]string{d.Output, d.Quarantine, d.Rejected, d.Replay}, d.Tiers...) {
				topic(name, "created, grown and configured by relay topics apply", "Create", "Alter", "AlterConfigs", "DescribeConfigs")
			}
		}
		topic(state, "created and configured by relay topics apply", "Create", "Alter", "AlterConfigs", "DescribeConfigs")
	case "quarantine", "replay", "console": // the console discards and replays as the commands do
		for _, src := range cfg.SourceTopics {
			d := cfg.Derived(src)
			topic(d.Quarantine, "the quarantined records; retention.ms for their deadline", "Read", "DescribeConfigs")
			if command != "quarantine" {
				topic(d.Replay, "replayed records are published here", "Write")
			}
		}
		topic(state, "the ledger: read, and written by discard and replay", "Read", "Write")
		group("relay's readers, named after the group", "Read")
		add("TransactionalId", cfg.GroupID+".", true, "the ledger writer of discard ("+cfg.GroupID+".discard) and replay ("+cfg.GroupID+".replay)", "Write")
	case "audit":
		for _, src := range cfg.SourceTopics {
			d := cfg.Derived(src)
			for _, name := range []string{src, d.Output, d.Quarantine, d.Rejected, d.Replay} {
				topic(name, "every end state a source record can reach", "Read")
			}
			// Retired tiers too: every topic the tier template names.
			if parts := cfg.TierTopicPattern(src); len(parts) > 1 && parts[0] != "" {
				add("Topic", parts[0], true, "the retry tiers, today's and retired ones: copies waiting there", "Read")
			} else {
				for _, name := range d.Tiers {
					topic(name, "the retry tiers: copies waiting there", "Read")
				}
			}
			for _, name := range []string{src, d.Output, d.Quarantine, d.Rejected} {
				topic(name, "its cleanup.policy: a compacted topic may have lost any record", "DescribeConfigs")
			}
		}
		topic(state, "the ledger", "Read")
		group("relay's group: its committed offsets bound the window; the audit's cursor is read too", "Describe")
		// Read on the cursor's group alone: Read on relay's would let
		// the audit's principal move relay's offsets.
		add("Group", cfg.GroupID+".audit", false, "the audit's cursor (--cursor): a completed run commits it", "Read")
	default:
		return nil, fmt.Errorf("no command %q: one of %s", command, strings.Join(Commands, ", "))
	}
	return slices.CompactFunc(out, func(a, b ACL) bool { return a == b }), nil
}

// GroupDescriber describes consumer groups (kafkaclient.Groups).
type GroupDescriber interface {
	DescribeConsumerGroups(ctx context.Context, groups []string, options ...kafka.DescribeConsumerGroupsAdminOption) (kafka.DescribeConsumerGroupsResult, error)
}

// MissingACLs is the start-up check of what a principal may do: the ACLs
// of need it does not hold. It asks the brokers which operations the
// principal is allowed (KIP-430's authorized operations) on every topic,
// and on the group. A transactional id cannot be asked about, and is found
// out when the producer starts; nor can the cluster (the brokers no
// longer say since KIP-700), whose only ACL relay needs is optional and
// found out when relay reads the brokers' configuration. Brokers that do not
// say (before Kafka 2.3) pass the check. Errors are the admin calls'.
// The group is described through groups (kafkaclient.Groups: a request
// to a group coordinator must not outlive its client, see there).
func MissingACLs(ctx context.Context, a *kafka.AdminClient, groups GroupDescriber, need []ACL) ([]ACL, error) {
	allowed := map[string][]kafka.ACLOperation{} // "Topic/name" -> operations; nil: unknown
	denied := map[string]bool{}                  // not even Describe
	var names []string
	for _, acl := range need {
		if acl.Resource == "Topic" && !slices.Contains(names, acl.Name) {
			names = append(names, acl.Name)
		}
	}
	if len(names) > 0 {
		res, err := a.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames(names), kafka.SetAdminOptionIncludeAuthorizedOperations(true))
		if err != nil {
			return nil, err
		}
		for _, d := range res.TopicDescriptions {
			switch d.Error.Code() {
			case kafka.ErrNoError:
				allowed["Topic/"+d.Name] = d.AuthorizedOperations
			case kafka.ErrTopicAuthorizationFailed:
				denied["Topic/"+d.Name] = true
			}
		}
	}
	if i := slices.IndexFunc(need, func(a ACL) bool { return a.Resource == "Group" }); i >= 0 {
		res, err := groups.DescribeConsumerGroups(ctx, []string{need[i].Name}, kafka.SetAdminOptionIncludeAuthorizedOperations(true))
		if err != nil {
			return nil, err
		}
		for _, g := range res.ConsumerGroupDescriptions {
			switch g.Error.Code() {
			case kafka.ErrNoError:
				allowed["Group/"] = g.AuthorizedOperations
			case kafka.ErrGroupAuthorizationFailed:
				denied["Group/"] = true
			}
		}
	}
	var missing []ACL
	for _, acl := range need {
		key := acl.Resource + "/"
		if acl.Resource == "Topic" {
			key += acl.Name
		}
		ops, known := allowed[key]
		switch {
		case acl.Resource == "TransactionalId" || acl.Resource == "Cluster":
		case denied[key]:
			missing = append(missing, acl)
		// An empty list from a resource that was described says nothing:
		// with an authorizer, describing it needs Describe, which the
		// list would hold.
		case known && len(ops) > 0 && !slices.Contains(ops, aclOps[acl.Operation]) && !slices.Contains(ops, kafka.ACLOperationAll):
			missing = append(missing, acl)
		}
	}
	return missing, nil
}

// ACLError names the ACLs a principal lacks.
type ACLError struct {
	Command string
	Missing []ACL
}

func (e *ACLError) Error() string {
	parts := make([]string, len(e.Missing))
	for i, a := range e.Missing {
		parts[i] = fmt.Sprintf("%s on %s %q", a.Operation, a.Resource, a.Name)
		if a.Prefixed {
			parts[i] = fmt.Sprintf("%s on %ss prefixed %q", a.Operation, a.Resource, a.Name)
		}
	}
	return fmt.Sprintf("relay's principal is not allowed %s; `relay topics acls %s` lists every ACL it needs",
		strings.Join(parts, ", "), e.Command)
}
