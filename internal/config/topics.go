package config

import "strings"

// Topics are the topics relay derives from one source topic, named by the
// RELAY_*_TOPIC templates. Derived is the only place that expands them:
// validation, the pipeline, `relay topics` and the operator commands all
// ask it.
type Topics struct {
	Source string
	Output string
	// Tiers has one topic per retry tier, in RELAY_RETRY_TIERS order. Under
	// partition ordering records wait in place and no tier topic is read
	// or written (see WaitsInPlace); the names are still derived, so that
	// validation sees them.
	Tiers      []string
	Quarantine string
	Rejected   string
	Replay     string
	// State is the group's state topic, one for every source.
	State string
}

// Derived names every topic relay derives from source.
func (c *Config) Derived(source string) Topics {
	t := Topics{
		Source: source,
		// {topic} only: the output template has no {group}.
		Output:     strings.ReplaceAll(c.OutputTopic, "{topic}", source),
		Quarantine: c.expand(c.QuarantineTopic, source),
		Rejected:   c.expand(c.RejectedTopic, source),
		Replay:     c.expand(c.ReplayTopic, source),
		State:      c.StateTopicName(),
	}
	for _, tier := range c.RetryTiers {
		t.Tiers = append(t.Tiers, strings.ReplaceAll(c.expand(c.RetryTopic, source), "{delay}", tier.Label))
	}
	return t
}

// StateTopicName names the state topic of the group.
func (c *Config) StateTopicName() string { return c.expand(c.StateTopic, "") }

// TierTopicPattern is the retry topic template of source split at its
// {delay} placeholders: the parts a tier topic of any delay is made of
// (retired tiers are found by it).
func (c *Config) TierTopicPattern(source string) []string {
	return strings.Split(c.expand(c.RetryTopic, source), "{delay}")
}

// WaitsInPlace reports whether records wait at their place in their
// partition (RELAY_ORDERING=partition) instead of moving to tier topics.
func (c *Config) WaitsInPlace() bool { return c.Ordering == "partition" }

// expand fills a topic template for one source topic.
func (c *Config) expand(template, source string) string {
	return strings.NewReplacer("{topic}", source, "{group}", c.GroupID).Replace(template)
}

// ReaderGroup is the group id of relay's readers of its own topics (the
// watermark probe, the operator commands' readers), named after the
// group, so that a prefixed ACL on RELAY_GROUP_ID covers them. They
// assign partitions and never commit: the group holds no offsets.
func (c *Config) ReaderGroup(role string) string { return c.GroupID + "." + role }
