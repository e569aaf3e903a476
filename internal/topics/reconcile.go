package topics

import (
	"context"
	"time"

	"relay/internal/config"
)

// Current is the plan of cfg as the cluster has it now.
func Current(a Admin, cfg *config.Config, timeout time.Duration) ([]State, error) {
	parts, err := Sources(a, cfg, timeout)
	if err != nil {
		return nil, err
	}
	return Inspect(a, Plan(cfg, parts), timeout)
}

// Applied is what Reconcile changed.
type Applied struct {
	Created, Grown []string
	// Replication is the factor topics were created with: the one asked
	// for, capped at the brokers present.
	Replication int
}

// Reconcile creates the missing topics of cfg's plan (Apply), adds
// partitions to those with fewer than their source (Grow), and returns the
// plan as the cluster has it afterwards. What it changed is returned with
// an error too. It never deletes a topic or changes its settings.
func Reconcile(ctx context.Context, a Grower, w Watermarks, cfg *config.Config, replication int, timeout time.Duration) ([]State, Applied, error) {
	done := Applied{Replication: replication}
	states, err := Current(a, cfg, timeout)
	if err != nil {
		return nil, done, err
	}
	md, err := a.GetMetadata(nil, false, int(timeout/time.Millisecond))
	if err == nil && len(md.Brokers) > 0 && len(md.Brokers) < replication {
		done.Replication = len(md.Brokers)
	}
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	done.Created, err = Apply(c, a, w, states, done.Replication)
	cancel()
	if err != nil {
		return nil, done, err
	}
	c, cancel = context.WithTimeout(ctx, 60*time.Second)
	done.Grown, err = Grow(c, a, w, states)
	cancel()
	if err != nil {
		return nil, done, err
	}
	states, err = Current(a, cfg, timeout)
	return states, done, err
}
