package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"

	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/hook"
	"relay/internal/ledger"
	"relay/internal/pipeline"
	"relay/internal/rules"
	"relay/internal/schema"
	"relay/internal/statetopic"
	"relay/internal/tiers"
)

// routes names every source's topics, with the retired tiers found at
// start-up.
func routes(cfg *config.Config, retired map[string][]pipeline.RetiredTier) []pipeline.Routes {
	out := make([]pipeline.Routes, 0, len(cfg.SourceTopics))
	for _, src := range cfg.SourceTopics {
		d := cfg.Derived(src)
		r := pipeline.Routes{
			Source: src, Output: d.Output, Quarantine: d.Quarantine, Rejected: d.Rejected, Replay: d.Replay, Retired: retired[src],
		}
		if !cfg.WaitsInPlace() { // else no tier topic is read or written
			r.Tiers = d.Tiers
		}
		out = append(out, r)
	}
	return out
}

// policy is the retry budget of cfg.
func policy(cfg *config.Config) tiers.Policy {
	p := tiers.Policy{
		BlockingAttempts: cfg.BlockingAttempts, BlockingBackoff: cfg.BlockingBackoff, BlockingMaxWait: cfg.BlockingBackoff,
		MaxAttempts: cfg.RetryMaxAttempts, MaxElapsed: cfg.RetryMaxElapsed, UnknownAttempts: cfg.UnclassifiedAttempts,
		WaitInPlace: cfg.WaitsInPlace(),
	}
	for _, t := range cfg.RetryTiers {
		p.Tiers = append(p.Tiers, t.Delay)
	}
	return p
}

// Policy is the retry budget relay runs with; relay replay's dry run
// decides with it too.
func Policy(cfg *config.Config) tiers.Policy { return policy(cfg) }

// LoadRules reads the rules file before anything connects; nil without one.
func LoadRules(cfg *config.Config) (*rules.Set, error) {
	if cfg.RulesFile == "" {
		return nil, nil
	}
	return rules.Load(cfg.RulesFile)
}

// NewAdmitter connects admission to the registry and checks, before the
// first record, that the reader version exists and every accepted version
// can be read as it. It waits while the registry is unavailable, 1 s at
// first, doubling up to 5 s, jittered.
func NewAdmitter(ctx context.Context, cfg *config.Config, log *slog.Logger) (*schema.Admitter, error) {
	client := schema.NewClient(cfg.SchemaRegistryURL, cfg.SchemaTimeout)
	if cfg.SchemaRegistryUser != "" || cfg.SchemaRegistrySecret != "" {
		client.SetCredentials(cfg.SchemaRegistryUser, cfg.SchemaRegistrySecret)
	}
	set := schema.Settings{
		Subject: cfg.SchemaSubject, Accept: cfg.Accepted(), ReaderVersion: cfg.SchemaReaderVersion,
		Timeout: cfg.SchemaTimeout, CacheSize: cfg.SchemaCacheSize,
	}
	type reader struct {
		id   int
		text string
	}
	check := func() (reader, error) {
		c, cancel := context.WithTimeout(ctx, 4*cfg.SchemaTimeout)
		defer cancel()
		id, text, err := schema.CheckAccepted(c, client, set)
		var un *schema.UnavailableError
		if err != nil && !errors.As(err, &un) {
			return reader{}, backoff.Permanent(err)
		}
		return reader{id, text}, err
	}
	redactor := envelope.NewRedactor(cfg.RedactPattern, 512)
	r, err := retry(ctx, check, time.Second, 5*time.Second, func(err error, in time.Duration) {
		log.Warn("schema registry unavailable at start-up; retrying", "err", redactor.Redact(err.Error()), "in", in.String())
	})
	if err != nil {
		return nil, err
	}
	log.Info("schema admission ready", "subject", set.Subject, "accept", set.Accept.String(), "reader_version", set.ReaderVersion, "reader_id", r.id)
	return schema.NewAdmitter(client, set, r.id, r.text)
}

// newMachine builds the failure state machine of cfg.
func newMachine(cfg *config.Config, retired map[string][]pipeline.RetiredTier, adm *schema.Admitter, rs *rules.Set, out pipeline.Outcomes,
	log *slog.Logger) *pipeline.Machine {
	m := &pipeline.Machine{
		Table: pipeline.NewTable(routes(cfg, retired)), Group: cfg.GroupID, Policy: policy(cfg),
		Redactor: envelope.NewRedactor(cfg.RedactPattern, cfg.ErrorMessageMax),
		Compat:   envelope.Compat{Spring: cfg.CompatSpring, Connect: cfg.CompatConnect},
		Outcomes: out, Log: log, Now: time.Now,
		WaitInPlace: cfg.WaitsInPlace(),
		StateTopic:  cfg.StateTopicName(), Actor: "relay/" + cfg.TransactionalID,
		Settled: &ledger.Settled{}, LoadState: statetopic.Loader(cfg, log),
	}
	if adm != nil {
		m.Admitter = adm
	}
	if rs != nil {
		m.Rules = rs
	}
	if cfg.HookURL != "" {
		m.Hook = hook.New(cfg.HookURL, cfg.HookTimeout)
	}
	if cfg.Ordering == "key" {
		m.Keys = &pipeline.KeyOrdering{StateTopic: cfg.StateTopicName(), Hold: cfg.OrderingHold}
	}
	return m
}

func describeBudget(cfg *config.Config) string {
	labels := make([]string, len(cfg.RetryTiers))
	for i, t := range cfg.RetryTiers {
		labels[i] = t.Label
	}
	return fmt.Sprintf("in place %d×%s, tiers [%s], at most %d attempts within %s", cfg.BlockingAttempts, cfg.BlockingBackoff,
		strings.Join(labels, ","), cfg.RetryMaxAttempts, cfg.RetryMaxElapsed)
}

// RuleCount is the number of rules in s, 0 without a rules file.
func RuleCount(s *rules.Set) int {
	if s == nil {
		return 0
	}
	return s.Len()
}
