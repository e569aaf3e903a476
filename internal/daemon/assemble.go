package daemon

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"relay/internal/checks"
	"relay/internal/config"
	"relay/internal/envelope"
	"relay/internal/features"
	"relay/internal/hook"
	"relay/internal/kafkaclient"
	"relay/internal/keyorder"
	"relay/internal/ledger"
	"relay/internal/pipeline"
	"relay/internal/rules"
	"relay/internal/schema"
	"relay/internal/statetopic"
	"relay/internal/tracing"
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

// hookMetrics hears the hook's requests and its timeouts.
type hookMetrics interface {
	hook.Observer
	HookTimedOut()
}

// newMachine builds the failure state machine of cfg.
func newMachine(cfg *config.Config, retired map[string][]pipeline.RetiredTier, adm *schema.Admitter, rs *rules.Set, out pipeline.Outcomes,
	discards pipeline.Discards, traces *tracing.Provider, alive func(), log *slog.Logger, hookAccess func(refused bool, status int), hookMetrics hookMetrics, group *features.Watch) (*pipeline.Machine, error) {
	o := pipeline.Options{
		Table: pipeline.NewTable(routes(cfg, retired)), Group: cfg.GroupID, Policy: checks.Policy(cfg),
		Redactor: envelope.NewRedactor(cfg.RedactPattern, cfg.ErrorMessageMax),
		Compat:   envelope.Compat{Spring: cfg.CompatSpring, Connect: cfg.CompatConnect},
		Outcomes: out, Log: log, Now: time.Now,
		WaitInPlace: cfg.WaitsInPlace(),
		StateTopic:  cfg.StateTopicName(), Actor: "relay/" + cfg.TransactionalID,
		Settled: &ledger.Settled{}, Discards: discards, LoadState: statetopic.Loader(cfg, log, alive),
		Tracer: traces.Tracer(pipeline.TracerName), Propagation: traces.Propagation(),
	}
	o.Clients.ConsumerID, o.Clients.ProducerID = kafkaclient.ClientIDs(cfg.Kafka)
	o.Clients.Broker, _, _ = strings.Cut(cfg.Kafka["bootstrap.servers"], ",")
	o.Clients.Broker = strings.TrimSpace(o.Clients.Broker)
	if adm != nil {
		o.Admitter = adm
	}
	if rs != nil {
		o.Rules = rs
	}
	if cfg.HookURL != "" {
		client := hook.New(cfg.HookURL, cfg.HookTimeout, cfg.HookConcurrency, traces.TracerProvider(), traces.Propagation().TextMap)
		auth, err := HookAuth(cfg)
		if err != nil {
			return nil, err
		}
		client.Authenticate(auth, hookAccess)
		if hookMetrics != nil {
			client.OnTimeout(hookMetrics.HookTimedOut)
			client.Observe(hookMetrics)
		}
		o.Hook = client
		if cfg.HookBatch > 1 {
			o.Hook = hook.NewBatcher(client, cfg.HookBatch, cfg.HookConcurrency)
		}
		o.Concurrency = cfg.HookConcurrency
	}
	if cfg.Ordering == "key" {
		meta := keyorder.MetadataFor(cfg.OffsetMetadataMax)
		if cfg.KeyParkMaxRecords > 0 && meta < keyorder.DefaultMetadata {
			log.Warn("the brokers' offset.metadata.max.bytes bounds how many followers a partition parks; past it they are copied into the tier",
				"offset_metadata_max_bytes", cfg.OffsetMetadataMax, "parked_set_bytes", meta)
		}
		o.Keys = &pipeline.KeyOrdering{StateTopic: cfg.StateTopicName(), Hold: cfg.OrderingHold, Park: keyorder.Limits{
			Records: cfg.KeyParkMaxRecords, Bytes: int64(cfg.KeyParkMaxBytes), Wait: cfg.KeyParkMaxWait, MaxAge: cfg.KeyParkMaxAge, Metadata: meta,
		}}
		if group != nil {
			o.Keys.Agreed = func() bool { return group.On(features.Park) }
			o.Keys.Withdrawn = func() bool { return group.Withdrawn(features.Park) }
		}
	}
	return pipeline.New(o)
}

// HookAuth is how relay authenticates itself to the hook, from cfg.
func HookAuth(cfg *config.Config) (hook.Auth, error) {
	tlsConf, err := cfg.HookTLS.Config()
	if err != nil {
		return hook.Auth{}, err
	}
	a := hook.Auth{TLS: tlsConf}
	if cfg.HookToken != nil {
		a.Token = cfg.HookToken.Get
	}
	if cfg.HookSigningSecret != nil {
		a.SigningSecret = cfg.HookSigningSecret.Get
	}
	return a, nil
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
