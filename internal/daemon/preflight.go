package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/kafkaclient"
	"relay/internal/kafkaerr"
	"relay/internal/pipeline"
	"relay/internal/retry"
	"relay/internal/topics"
)

// runRoles are the topics `relay run` reads or writes besides its sources;
// each keeps the source partition number, so each must have at least the
// source's partitions.
var runRoles = []string{"output", "retry", "quarantine", "rejected", "replay", "state"}

// startChecks runs what must hold before relay consumes: the topics
// (preflight) and the tier topics of an earlier configuration that still
// hold records (retiredTiers).
func startChecks(ctx context.Context, consumer *kafka.Consumer, cfg *config.Config, log *slog.Logger) (
	map[string]time.Duration, map[string][]pipeline.RetiredTier, error) {
	admin, err := kafka.NewAdminClientFromConsumer(consumer)
	if err != nil {
		return nil, nil, fmt.Errorf("admin client: %w", err)
	}
	defer admin.Close()
	refused := func() error { return credentialRefused(consumer, cfg, log) }
	if err := checkACLs(ctx, admin, cfg, log, refused); err != nil {
		return nil, nil, err
	}
	retention, err := preflight(ctx, admin, cfg, log)
	if err == nil {
		err = untilReachable(ctx, log, "the brokers' transaction.max.timeout.ms", func() error {
			return fitTransactionTimeout(ctx, admin, cfg, log)
		})
	}
	if err != nil {
		return nil, nil, err
	}
	var retired map[string][]pipeline.RetiredTier
	err = untilReachable(ctx, log, "the group's committed offsets on retired tier topics", func() (err error) {
		retired, err = retiredTiers(ctx, admin, consumer.Committed, cfg, log)
		return err
	})
	if err == nil {
		// What the consumer queued while relay waited for the brokers
		// (one "all brokers down" a second) was said by the waits: the
		// loop would log each again at its first poll.
		err = refused()
	}
	return retention, retired, err
}

// credentialRefused reads the errors the consumer (and the admin client
// on its handle) has queued, and turns a refused credential — SASL
// authentication failed, a TLS handshake the broker or relay refused —
// into a *ConfigError naming the variables to check: waiting will not fix
// it. Nothing else is consumed: before the loop subscribes, errors are
// all the queue holds, and all of it is read (bounded).
func credentialRefused(c *kafka.Consumer, cfg *config.Config, log *slog.Logger) error {
	for range 10000 {
		ev := c.Poll(0)
		if ev == nil {
			return nil
		}
		e, ok := ev.(kafka.Error)
		if !ok {
			continue
		}
		vars := kafkaerr.CredentialVars(e, cfg.Kafka, cfg.VarForProperty)
		if vars != "" && !kafkaerr.CredentialRefused(e) {
			// A connection cut short, an identity provider out of
			// reach: it may heal, and relay waits as for any broker.
			log.Warn("cannot authenticate to the broker yet; retrying", "check", vars, "err", e)
			continue
		}
		if vars != "" {
			what := "relay's credential is refused"
			if kafkaerr.CredentialCode(e) == kafka.ErrSsl {
				what = "the TLS handshake with the broker failed"
			}
			// Not wrapped: a Kafka error in the chain would be retried.
			return &ConfigError{Err: fmt.Errorf("%s: %s: %s", vars, what, e.Error())}
		}
	}
	return nil
}

// checkACLs asks the brokers whether relay's principal holds every ACL
// `relay topics acls run` lists. A missing one is a *ConfigError naming
// each resource and operation; a missing optional one is a warning. The
// brokers say nothing of transactional ids: that ACL is found out when
// the producer starts.
func checkACLs(ctx context.Context, a *kafka.AdminClient, cfg *config.Config, log *slog.Logger, refused func() error) error {
	need, err := topics.ACLs(cfg, "run")
	if err != nil {
		return err
	}
	var missing []topics.ACL
	err = untilReachable(ctx, log, "the ACL check (topic and group descriptions)", func() (err error) {
		c, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		defer cancel()
		if missing, err = topics.MissingACLs(c, a, kafkaclient.GroupsOf(cfg), need); err != nil {
			if r := refused(); r != nil {
				return r
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	var required []topics.ACL
	for _, m := range missing {
		if !m.Optional {
			required = append(required, m)
			continue
		}
		log.Warn("relay's principal lacks an optional ACL; relay goes on without what it gives", "resource", m.Resource, "name", m.Name,
			"operation", m.Operation, "for", m.Why)
	}
	if len(required) > 0 {
		return &ConfigError{Err: &topics.ACLError{Command: "run", Missing: required}}
	}
	return nil
}

// preflight checks that every source exists and that every hop relay writes
// has at least as many partitions as its source: writing to a partition
// that does not exist fails every transaction that tries it (dead-letter
// set-ups have lost records to exactly this). It warns when quarantine retention
// is shorter than the response objective. It waits for the broker while it
// is unreachable.
// It returns the retention of each quarantine topic that has a finite one,
// for the retention headroom metric.
func preflight(ctx context.Context, a topics.Admin, cfg *config.Config, log *slog.Logger) (map[string]time.Duration, error) {
	var ret map[string]time.Duration
	err := untilReachable(ctx, log, "topic metadata", func() (err error) {
		ret, err = checkTopics(ctx, a, cfg, log)
		return err
	})
	return ret, err
}

// untilReachable calls check until it gives nil or a verdict, waiting out
// a cluster that cannot be reached (kafkaerr.Outage: a broker away, a call
// that timed out): 1 s at first, doubling up to 30 s, jittered. Each wait
// is logged with what relay waits for; relay is not ready meanwhile (the
// loop has not started), and not stuck either (/livez counts from the
// loop's first round). Only ctx ends the wait early.
func untilReachable(ctx context.Context, log *slog.Logger, what string, check func() error) error {
	op := func() (struct{}, error) {
		err := check()
		if err != nil && ctx.Err() != nil {
			return struct{}{}, backoff.Permanent(ctx.Err())
		}
		if err != nil && !kafkaerr.Outage(err) {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	}
	_, err := retry.Do(ctx, op, time.Second, 30*time.Second, func(err error, in time.Duration) {
		log.Warn("waiting for the brokers; relay starts consuming once they answer", "for", what, "err", err, "in", in.String())
	})
	return err
}

func checkTopics(ctx context.Context, a topics.Admin, cfg *config.Config, log *slog.Logger) (map[string]time.Duration, error) {
	parts, err := topics.Sources(a, cfg, cfg.OpTimeout)
	if err != nil {
		return nil, err
	}
	var plan []topics.Spec
	for _, s := range topics.Plan(cfg, parts) {
		for _, r := range runRoles {
			if strings.HasPrefix(s.Role, r) {
				plan = append(plan, s)
			}
		}
	}
	states, err := topics.Inspect(ctx, a, plan, cfg.OpTimeout)
	if err != nil {
		return nil, err
	}
	if err := topics.Check(states); err != nil {
		return nil, err
	}
	if err := checkDurability(ctx, a, cfg, states, log); err != nil {
		return nil, err
	}
	if err := checkParkable(ctx, a, cfg, log); err != nil {
		return nil, err
	}
	// The range assignor keeps partition p of co-partitioned topics on
	// one member. A record's key state and its ledger entry live with its
	// source partition number, and a tier or replay topic with more
	// partitions than its source would hand partition p to another
	// member.
	var errs []error
	for _, s := range states {
		if (strings.HasPrefix(s.Role, "retry") || s.Role == "replay") && s.Have != s.Partitions {
			errs = append(errs, fmt.Errorf("%s topic %q has %d partitions; relay needs exactly its source %q's %d, so a source partition and its %s partition go to the same member",
				s.Role, s.Name, s.Have, s.Source, s.Partitions, s.Role))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	retention := map[string]time.Duration{}
	for _, s := range states {
		if s.Role != "quarantine" {
			continue
		}
		c, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		ret, ok, err := topics.Retention(c, a, s.Name)
		cancel()
		switch {
		case err != nil:
			log.Warn("cannot read quarantine retention", "topic", s.Name, "err", err)
		case ok && ret < cfg.QuarantineObjective:
			retention[s.Name] = ret
			log.Warn(fmt.Sprintf("quarantine retention is shorter than the response objective: records may be deleted before anyone must have looked at them; raise retention.ms of the topic or lower %s", config.EnvQuarantineObjective),
				"topic", s.Name, "retention", ret.String(), "objective", cfg.QuarantineObjective.String())
		case ok:
			retention[s.Name] = ret
		}
	}
	return retention, nil
}

// fitTransactionTimeout is kafkaclient.FitTransactionTimeout (also run by
// the operator commands that write transactions).
func fitTransactionTimeout(ctx context.Context, a kafkaclient.BrokerDescriber, cfg *config.Config, log *slog.Logger) error {
	return kafkaclient.FitTransactionTimeout(ctx, a, cfg, log)
}

// checkDurability warns of each topic relay reads or writes that one
// broker's loss could lose acknowledged records of (topics.Durability),
// or, with RELAY_TOPICS_DURABILITY=require, refuses to start naming them.
func checkDurability(ctx context.Context, a topics.Admin, cfg *config.Config, states []topics.State, log *slog.Logger) error {
	sources, err := topics.ReadDurability(ctx, a, cfg.SourceTopics, cfg.OpTimeout)
	if err != nil {
		return err
	}
	var risks, unread []string
	judge := func(d topics.Durability, role, name, fix string) {
		if r := d.Risk(); r != "" {
			risks = append(risks, fmt.Sprintf("%s topic %q: %s%s", role, name, r, fix))
		} else if d.Replicas >= 3 && d.MinInsync == 0 {
			unread = append(unread, name)
		}
	}
	for _, src := range cfg.SourceTopics {
		judge(sources[src], "source", src, "")
	}
	for _, s := range states {
		judge(s.Durability, s.Role, s.Name, " (relay topics apply raises min.insync.replicas of relay's own topics)")
	}
	// A topic whose min.insync.replicas relay may not read (no
	// DescribeConfigs on it) is not known to be safe: require refuses it,
	// warn says it was not checked.
	if cfg.RequireDurable && len(unread) > 0 {
		risks = append(risks, fmt.Sprintf("min.insync.replicas of %s not readable (relay's principal lacks DescribeConfigs on them), so not known to be 2 or more", strings.Join(unread, ", ")))
	}
	if len(risks) > 0 && cfg.RequireDurable {
		return &ConfigError{Err: fmt.Errorf("%s=require: %s", config.EnvTopicsDurability, strings.Join(risks, "; "))}
	}
	if len(unread) > 0 {
		log.Info("min.insync.replicas not checked: relay's principal may not read the topics' configuration (DescribeConfigs)", "topics", unread,
			"setting", config.EnvTopicsDurability)
	}
	if len(risks) > 0 {
		log.Warn("topics are not replicated safely: one broker's loss could lose acknowledged records or stop writes", "topics", risks,
			"setting", config.EnvTopicsDurability)
	}
	return nil
}

// checkParkable refuses parking (RELAY_KEY_PARK_MAX_RECORDS) on a source
// whose cleanup.policy compacts it: a parked follower stays in its source
// partition, uncommitted, until its turn, and compaction may remove it
// meanwhile (a later record of its key supersedes it), so the parked
// offset is gone when the partition is read again. A source relay may not
// describe passes. Parking at its default (the variable unset) is turned
// off instead of refused, on a compacted source and on one relay may not
// describe, and the instance copies followers into the tiers.
func checkParkable(ctx context.Context, a topics.Admin, cfg *config.Config, log *slog.Logger) error {
	if cfg.Ordering != "key" || cfg.KeyParkMaxRecords <= 0 {
		return nil
	}
	for _, src := range cfg.SourceTopics {
		c, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		compacted, known, err := topics.Compacted(c, a, src)
		cancel()
		if err != nil {
			return err
		}
		if !known && cfg.KeyParkDefault {
			log.Info("cleanup.policy of the source not checked: relay's principal may not read its configuration (DescribeConfigs); parking needs a source that does not compact, so it is off (set RELAY_KEY_PARK_MAX_RECORDS to park anyway, or grant DescribeConfigs on the source)", "topic", src)
			cfg.KeyParkMaxRecords = 0
			return nil
		}
		if !known {
			log.Info("cleanup.policy of the source not checked: relay's principal may not read its configuration (DescribeConfigs); parking needs a source that does not compact", "topic", src)
		}
		if known && compacted && cfg.KeyParkDefault {
			log.Info("source topic is compacted (cleanup.policy): parking is off, followers of a blocked key are copied into its head's tier; a parked follower could be compacted away before its turn",
				"topic", src, "var", config.EnvKeyParkMaxRecords)
			cfg.KeyParkMaxRecords = 0
			return nil
		}
		if known && compacted {
			return &ConfigError{Err: fmt.Errorf("%s: source topic %q is compacted (cleanup.policy): a parked follower waits in its source partition and compaction may remove it before its turn; set %s=0 (its followers are copied into the tiers) or use a source with cleanup.policy=delete",
				config.EnvKeyParkMaxRecords, src, config.EnvKeyParkMaxRecords)}
		}
	}
	return nil
}
