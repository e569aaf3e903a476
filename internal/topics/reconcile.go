package topics

import (
	"context"
	"time"

	"relay/internal/config"
)

// Current is the plan of cfg as the cluster has it now.
func Current(ctx context.Context, a Admin, cfg *config.Config, timeout time.Duration) ([]State, error) {
	parts, err := Sources(a, cfg, timeout)
	if err != nil {
		return nil, err
	}
	return Inspect(ctx, a, Plan(cfg, parts), timeout)
}

// Reconciler is what Reconcile needs of an admin client.
type Reconciler interface {
	Grower
	Alterer
}

// Applied is what Reconcile changed.
type Applied struct {
	Created, Grown []string
	// Raised are the topics whose min.insync.replicas it raised.
	Raised []string
	// Replication is the factor topics were created with: the one asked
	// for, capped at the brokers present.
	Replication int
}

// Lines say what Reconcile changed, a topic a line, in the order it
// changed them.
func (d Applied) Lines() []string {
	var out []string
	for _, t := range d.Created {
		out = append(out, "created "+t)
	}
	for _, t := range d.Grown {
		out = append(out, "added partitions to "+t)
	}
	for _, t := range d.Raised {
		out = append(out, "raised min.insync.replicas of "+t)
	}
	return out
}

// Reconcile creates the missing topics of cfg's plan (Apply), adds
// partitions to those with fewer than their source (Grow), raises
// min.insync.replicas where it is below one less than the replicas
// (RaiseMinInsync), and returns the plan as the cluster has it afterwards.
// What it changed is returned with an error too. It never deletes a topic
// or changes another of its settings.
func Reconcile(ctx context.Context, a Reconciler, w Watermarks, cfg *config.Config, replication int, timeout time.Duration) ([]State, Applied, error) {
	done := Applied{Replication: replication}
	states, err := Current(ctx, a, cfg, timeout)
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
	if states, err = Current(ctx, a, cfg, timeout); err != nil {
		return nil, done, err
	}
	c, cancel = context.WithTimeout(ctx, 60*time.Second)
	done.Raised, err = RaiseMinInsync(c, a, states)
	cancel()
	if err != nil || len(done.Raised) == 0 {
		return states, done, err
	}
	states, err = Current(ctx, a, cfg, timeout)
	return states, done, err
}
