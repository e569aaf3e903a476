package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"relay/internal/config"
	"relay/internal/topics"
)

// runRoles are the hops `relay run` writes to; each keeps the source
// partition number, so each must have at least the source's partitions.
var runRoles = []string{"output", "retry", "quarantine", "rejected"}

// preflight checks that every source exists and that every hop relay writes
// has at least as many partitions as its source: writing to a partition
// that does not exist would abort every transaction (the seed's field
// report lost records to exactly this). It warns when quarantine retention
// is shorter than the response objective. It waits for the broker while it
// is unreachable.
func preflight(ctx context.Context, a topics.Admin, cfg *config.Config, log *slog.Logger) error {
	backoff := time.Second
	for {
		err := checkTopics(ctx, a, cfg, log)
		var ke kafka.Error
		if err == nil || !errors.As(err, &ke) {
			// nil, or a verdict on the topics themselves.
			return err
		}
		log.Warn("cannot read topic metadata yet; retrying", "err", err, "in", backoff.String())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func checkTopics(ctx context.Context, a topics.Admin, cfg *config.Config, log *slog.Logger) error {
	parts, err := topics.Sources(a, cfg, cfg.OpTimeout)
	if err != nil {
		return err
	}
	roles := runRoles
	if cfg.Ordering == "key" {
		roles = slices.Concat(runRoles, []string{"state"})
	}
	var plan []topics.Spec
	for _, s := range topics.Plan(cfg, parts) {
		for _, r := range roles {
			if strings.HasPrefix(s.Role, r) {
				plan = append(plan, s)
			}
		}
	}
	states, err := topics.Inspect(a, plan, cfg.OpTimeout)
	if err != nil {
		return err
	}
	if err := topics.Check(states); err != nil {
		return err
	}
	if cfg.Ordering == "key" {
		// The range assignor keeps partition p of co-partitioned topics
		// on one member; a tier topic with more partitions than its
		// source would split a key's records across members.
		var errs []error
		for _, s := range states {
			if strings.HasPrefix(s.Role, "retry") && s.Have != s.Partitions {
				errs = append(errs, fmt.Errorf("%s topic %q has %d partitions; key ordering needs exactly its source %q's %d, so a source partition and its tier partitions go to the same member",
					s.Role, s.Name, s.Have, s.Source, s.Partitions))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
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
			log.Warn(fmt.Sprintf("quarantine retention is shorter than the response objective: records may be deleted before anyone must have looked at them; raise retention.ms of the topic or lower %s", config.EnvQuarantineObjective),
				"topic", s.Name, "retention", ret.String(), "objective", cfg.QuarantineObjective.String())
		}
	}
	return nil
}
