package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"relay/internal/secret"
)

// Accepted returns the parsed accepted versions (valid after Load).
func (c *Config) Accepted() Versions {
	v, _ := ParseVersions(c.SchemaAccept)
	return v
}

// AttemptBound is the longest one attempt at a record can take: a registry
// lookup and a hook call, when they are configured. Under the batch
// protocol a call can wait for a request in flight before its own.
func (c *Config) AttemptBound() time.Duration {
	var d time.Duration
	if c.SchemaRegistryURL != "" {
		d += c.SchemaTimeout
	}
	if c.HookURL != "" {
		d += c.HookTimeout
		if c.HookBatch > 1 {
			d += c.HookTimeout
		}
	}
	return d
}

// InPlaceBound is the longest the blocking retry can hold one record.
func (c *Config) InPlaceBound() time.Duration {
	b := time.Duration(c.BlockingAttempts)
	return (b+1)*c.AttemptBound() + b*c.BlockingBackoff
}

// batching says whether records are handed to the hook several at once
// (RELAY_HOOK_CONCURRENCY above 1 with a hook).
func (c *Config) batching() bool { return c.HookURL != "" && c.HookConcurrency > 1 }

// TransactionBudget is the longest a transaction can legitimately stay
// open: the commit interval, the longest in-place retry of its last
// record, and one commit call. With records handled in batches, a batch
// that begins as the transaction is due still has a commit interval of
// its own before the rest is deferred; what it has open then (at most one
// try per slot, none waiting for another) ends within one in-place bound.
func (c *Config) TransactionBudget() time.Duration {
	intervals := time.Duration(1)
	if c.batching() {
		intervals = 2
	}
	return intervals*c.CommitInterval + c.InPlaceBound() + c.OpTimeout
}

// budgetTerms spells the budget out for messages, so the user sees which
// setting makes it long.
func (c *Config) budgetTerms() string {
	interval := ""
	if c.batching() {
		interval = "2×"
	}
	return fmt.Sprintf("%s%s (%s) + %d×(attempt %s + backoff %s) + first attempt %s + %s (%s) = %s",
		interval, EnvCommitInterval, c.CommitInterval, c.BlockingAttempts, c.AttemptBound(), c.BlockingBackoff,
		c.AttemptBound(), EnvOpTimeout, c.OpTimeout, c.TransactionBudget())
}

// deriveTransactionTimeout is transaction.timeout.ms when the user has not
// set it: the budget plus room to ride out a broker restart, in whole
// seconds, and at most what a broker with default settings accepts.
// Validation reports a budget that does not fit even that.
//
// It is no longer than it must be: an instance that dies in a commit
// leaves offsets that no new owner may read until the broker aborts the
// transaction, this long after it began (and within the broker's cleanup
// interval, 10 s by default). With the default settings that is about
// when the session timeout (45 s) hands the partitions over anyway (36 s,
// or 45 s with a registry and a hook).
//
// A delivery or socket timeout set for the producer must fit in it
// (librdkafka refuses the producer otherwise), so it is at least as long
// as one: a setting that fitted the earlier derived minute still does.
func (c *Config) deriveTransactionTimeout() time.Duration {
	d := c.TransactionBudget() + transactionRideOut
	for _, prop := range producerTimeouts {
		if ms, err := strconv.Atoi(c.Kafka[prop]); err == nil && ms > 0 {
			d = max(d, time.Duration(ms)*time.Millisecond)
		}
	}
	return min((d + time.Second - 1).Truncate(time.Second), brokerMaxTransactionTimeout)
}

// producerTimeouts are the producer's timeouts librdkafka requires to fit
// in transaction.timeout.ms (socket.timeout.ms within 100 ms of it).
var producerTimeouts = []string{"message.timeout.ms", "delivery.timeout.ms", "socket.timeout.ms"}

// FitBrokerTransactionMax checks transaction.timeout.ms against the
// broker's transaction.max.timeout.ms, which only the broker knows: the
// broker refuses every transaction of a producer asking for more. A derived
// timeout is lowered to the broker's limit when the budget still fits in
// it; a timeout the user set is never changed.
func (c *Config) FitBrokerTransactionMax(limit time.Duration) (lowered bool, err error) {
	if limit <= 0 || c.TransactionTimeout <= limit {
		return false, nil
	}
	prop := "transaction.timeout.ms"
	if !c.txnTimeoutDerived {
		return false, &Error{Var: c.VarForProperty(prop), Problem: fmt.Sprintf(
			"%s is more than the broker's transaction.max.timeout.ms (%s), so the broker would refuse every transaction; set at most %d",
			c.TransactionTimeout, limit, limit.Milliseconds())}
	}
	if c.TransactionBudget() >= limit {
		return false, &Error{Var: EnvBlockingAttempts, Problem: fmt.Sprintf(
			"the blocking retry does not fit the broker's transaction.max.timeout.ms (%s): %s; lower %s, %s, %s or %s",
			limit, c.budgetTerms(), EnvBlockingAttempts, EnvSchemaTimeout, EnvHookTimeout, EnvBlockingBackoff)}
	}
	c.TransactionTimeout = limit
	c.Kafka[prop] = strconv.FormatInt(limit.Milliseconds(), 10)
	return true, nil
}

// validateFailures checks the failure state machine's settings.
func (p *parser) validateFailures(c *Config) {
	p.validateTopics(c)
	p.validateBudget(c)
	p.validateShutdown(c)
	p.validateChecks(c)
	p.validateTransaction(c)
}

// validateTopics checks the topic templates, and that every topic relay
// derives has one role.
func (p *parser) validateTopics(c *Config) {
	templates := []struct{ name, tmpl string }{
		{EnvQuarantineTopic, c.QuarantineTopic}, {EnvRejectedTopic, c.RejectedTopic},
		{EnvReplayTopic, c.ReplayTopic}, {EnvRetryTopic, c.RetryTopic},
	}
	for _, t := range templates {
		if !strings.Contains(t.tmpl, "{topic}") && len(c.SourceTopics) > 1 {
			p.fail(t.name, "%q has no {topic} but %s names %d topics", t.tmpl, EnvSourceTopics, len(c.SourceTopics))
		}
	}
	if len(c.RetryTiers) > 1 && !strings.Contains(c.RetryTopic, "{delay}") {
		p.fail(EnvRetryTopic, "%q has no {delay} but %s names %d tiers", c.RetryTopic, EnvRetryTiers, len(c.RetryTiers))
	}
	// Every topic relay writes or reads has one role: a name used twice
	// would, e.g., make relay consume its own quarantine.
	owner := map[string]string{}
	claim := func(name, topic, role string) {
		if !topicName.MatchString(topic) {
			p.fail(name, "gives %q, not a valid topic name", topic)
			return
		}
		if prev, taken := owner[topic]; taken && prev != role {
			p.fail(name, "gives %q, which is already the %s", topic, prev)
			return
		}
		owner[topic] = role
	}
	for _, s := range c.SourceTopics {
		owner[s] = "source topic"
	}
	for _, s := range c.SourceTopics {
		d := c.Derived(s)
		claim(EnvOutputTopic, d.Output, "output topic of "+s)
		claim(EnvQuarantineTopic, d.Quarantine, "quarantine topic of "+s)
		claim(EnvRejectedTopic, d.Rejected, "rejected topic of "+s)
		claim(EnvReplayTopic, d.Replay, "replay topic of "+s)
		for i, t := range c.RetryTiers {
			claim(EnvRetryTopic, d.Tiers[i], "retry tier "+t.Label+" of "+s)
		}
	}
	claim(EnvStateTopic, c.StateTopicName(), "state topic")
}

// validateBudget checks the retry budget, the ordering it serves and the
// quarantine's retention against each other.
func (p *parser) validateBudget(c *Config) {
	if c.Ordering == "key" {
		if len(c.RetryTiers) == 0 {
			p.fail(EnvRetryTiers, "is empty, but key ordering moves a failing record and its followers through the tiers")
		}
	}
	// A source partition, its tier and replay partitions, its blocked keys
	// and its ledger entries live on one member: the range assignor gives
	// co-partitioned topics (same partition count) to the same member.
	if s, ok := c.Kafka["partition.assignment.strategy"]; ok && s != "range" {
		p.fail(c.VarForProperty("partition.assignment.strategy"), "%q: relay needs range, so a source partition and its tier and replay partitions go to the same member", s)
	}
	c.Kafka["partition.assignment.strategy"] = "range"
	// KIP-848's consumer group protocol assigns on the broker and takes
	// neither a client assignor nor relay's session settings; librdkafka
	// 2.11.1, relay's, logs that it is a Preview not to be used in
	// production (generally available from 2.12).
	if gp, ok := c.Kafka["group.protocol"]; ok && gp != "classic" {
		p.fail(c.VarForProperty("group.protocol"), "%q: relay runs the classic group protocol only. The consumer protocol (KIP-848) is a Preview in librdkafka 2.11.1, relay's (\"MUST NOT be used in production\"; generally available from 2.12), "+
			"takes no client assignor (relay needs range, so a source partition and its tier and replay partitions go to one member) and no session.timeout.ms or heartbeat.interval.ms (relay sets them)", gp)
	}
	if c.WaitsInPlace() && len(c.RetryTiers) == 0 && c.RetryMaxAttempts > c.BlockingAttempts+1 {
		p.fail(EnvRetryTiers, "is empty, but partition ordering waits the tier delays between attempts; give at least one delay, or lower %s to %d",
			EnvRetryMaxAttempts, c.BlockingAttempts+1)
	}
	if len(c.RetryTiers) > 0 && c.RetryMaxElapsed > 0 && c.RetryMaxElapsed < c.RetryTiers[0].Delay {
		p.fail(EnvRetryMaxElapsed, "%s is shorter than the first tier's delay (%s): no record would ever reach a tier", c.RetryMaxElapsed, c.RetryTiers[0].Label)
	}
	if c.UnclassifiedAttempts > c.RetryMaxAttempts {
		p.fail(EnvUnclassifiedAttempts, "%d is more than %s (%d)", c.UnclassifiedAttempts, EnvRetryMaxAttempts, c.RetryMaxAttempts)
	}
	if c.QuarantineRetention > 0 && c.QuarantineRetention < c.QuarantineObjective {
		p.fail(EnvQuarantineRetention, "%s is shorter than %s (%s): quarantined records would be deleted before anyone must have looked at them",
			c.QuarantineRetention, EnvQuarantineObjective, c.QuarantineObjective)
	}
}

// ShutdownNeed is the longest a graceful stop can take before it leaves
// the group: records the hook is working on when the signal comes finish
// (with the batch protocol; one record at a time, the record in hand is
// interrupted and stays in its source), then the last transaction sends
// its offsets and commits, each call within RELAY_OP_TIMEOUT.
func (c *Config) ShutdownNeed() time.Duration {
	d := 2 * c.OpTimeout
	if c.batching() {
		d += c.InPlaceBound()
	}
	return d
}

// validateShutdown checks that a graceful stop fits its bound: past it,
// relay gives the stop up (exit 1), and what it had handled is redone
// after the restart. Unset, the bound is derived: 30s, or the stop's need
// and 5s to flush the last spans and metrics, when that is longer.
func (p *parser) validateShutdown(c *Config) {
	need := c.ShutdownNeed()
	if _, set := p.lookup(EnvShutdownTimeout); !set {
		c.ShutdownTimeout = max(c.ShutdownTimeout, (need + 5*time.Second + time.Second - 1).Truncate(time.Second))
		return
	}
	if c.ShutdownTimeout >= need {
		return
	}
	terms := fmt.Sprintf("2×%s (%s)", EnvOpTimeout, c.OpTimeout)
	if c.batching() {
		terms = fmt.Sprintf("the in-place retries of records the hook is working on (%d×(attempt %s + backoff %s) + first attempt %s) + %s",
			c.BlockingAttempts, c.AttemptBound(), c.BlockingBackoff, c.AttemptBound(), terms)
	}
	p.fail(EnvShutdownTimeout, "%s is shorter than a graceful stop can take: %s = %s; raise it to at least %s (and the orchestrator's grace period above it)",
		c.ShutdownTimeout, terms, need, need)
}

// validateChecks checks the registry, rules and hook variables together.
func (p *parser) validateChecks(c *Config) {
	if c.SchemaRegistryURL == "" {
		for _, v := range []string{EnvRulesFile, EnvHookURL, EnvSchemaSubject, EnvSchemaAccept} {
			if s, _ := p.lookup(v); strings.TrimSpace(s) != "" {
				p.fail(v, "needs %s: rules, the hook and schema checks read the decoded record", EnvSchemaRegistryURL)
			}
		}
	} else {
		checkURL(p, EnvSchemaRegistryURL, c.SchemaRegistryURL)
		if c.SchemaSubject == "" {
			p.fail(EnvSchemaSubject, "required with %s", EnvSchemaRegistryURL)
		}
		if c.SchemaAccept == "" {
			p.fail(EnvSchemaAccept, "required with %s (example: 3-5)", EnvSchemaRegistryURL)
		} else if acc, err := ParseVersions(c.SchemaAccept); err != nil {
			p.fail(EnvSchemaAccept, "%v", err)
		} else {
			if c.SchemaReaderVersion == 0 {
				c.SchemaReaderVersion = acc.Max()
			}
			if !acc.Contains(c.SchemaReaderVersion) {
				p.fail(EnvSchemaReaderVersion, "version %d is not among the accepted versions %s", c.SchemaReaderVersion, acc)
			}
		}
	}
	if c.HookURL != "" {
		checkURL(p, EnvHookURL, c.HookURL)
	}
}

// checkTraceURL checks RELAY_TRACE_URL: an http(s) URL with {traceId}.
func checkTraceURL(p *parser, raw string) {
	if raw == "" {
		return
	}
	checkURL(p, EnvTraceURL, strings.ReplaceAll(raw, TraceIDPlaceholder, "x"))
	if !strings.Contains(raw, TraceIDPlaceholder) {
		p.fail(EnvTraceURL, "%q has no %s where the trace id goes", raw, TraceIDPlaceholder)
	}
}

// validateTransaction checks that the blocking retry fits the transaction.
func (p *parser) validateTransaction(c *Config) {
	// The blocking retry runs inside the open transaction: the longest a
	// record can be held in place, plus the commit interval and one commit
	// call, must end before the broker aborts the transaction and before
	// the group evicts this member.
	if c.CommitInterval > 0 && c.OpTimeout > 0 {
		need := c.TransactionBudget()
		lower := fmt.Sprintf("%s, %s, %s or %s", EnvBlockingAttempts, EnvSchemaTimeout, EnvHookTimeout, EnvBlockingBackoff)
		txnVar := c.VarForProperty("transaction.timeout.ms")
		switch {
		case need < c.TransactionTimeout:
		case c.txnTimeoutDerived:
			// Only a budget over the broker's default limit gets here.
			p.fail(EnvBlockingAttempts, "the blocking retry does not fit transaction.timeout.ms, which relay derives up to %s (the broker's default transaction.max.timeout.ms): %s; lower %s, or set %s if the broker allows more",
				brokerMaxTransactionTimeout, c.budgetTerms(), lower, txnVar)
		default:
			p.fail(txnVar, "%s is too short for the blocking retry: %s; raise it (or unset it, and relay derives one that fits), or lower %s",
				c.TransactionTimeout, c.budgetTerms(), lower)
		}
		if need >= c.MaxPollInterval {
			p.fail(EnvBlockingAttempts, "the blocking retry does not fit max.poll.interval.ms (%s, %s): %s; lower %s, or raise %s",
				c.MaxPollInterval, c.VarForProperty("max.poll.interval.ms"), c.budgetTerms(), lower, c.VarForProperty("max.poll.interval.ms"))
		}
	}
}

func checkURL(p *parser, name, raw string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.fail(name, "%q is not an http(s) URL", secret.MaskURL(raw))
	}
}

// redactURL hides the password of a URL for messages and relay config.
