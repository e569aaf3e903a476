package features

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Watch keeps a group's agreement, describing the group every Every, and
// at once when poked (Poke: after each rebalance). For Settle after a poke
// or a change, while a feature is off, it looks every Quick: a member that
// has just joined writes its record only once it knows its member id,
// after the others' first look. The group's membership can change without
// a rebalance this member sees (a static member restarted within its
// session keeps its partitions and its place, as when the last older
// member is replaced by a newer one), so only a look at the group tells.
type Watch struct {
	// Describe lists the group's members.
	Describe             func(ctx context.Context) ([]Member, error)
	Every, Quick, Settle time.Duration
	Log                  *slog.Logger
	// Changed, when set, is told each feature's state at the first look
	// and at every change.
	Changed func(feature string, on bool)

	agreed atomic.Pointer[Agreement]
	poke   chan struct{}
}

// NewWatch is a Watch of the group describe lists, every every.
func NewWatch(describe func(ctx context.Context) ([]Member, error), every time.Duration, log *slog.Logger) *Watch {
	return &Watch{Describe: describe, Every: every, Quick: time.Second, Settle: 30 * time.Second, Log: log, poke: make(chan struct{}, 1)}
}

// Poke makes the watch look at the group now (soon, if it is looking).
// It never blocks.
func (w *Watch) Poke() {
	if w == nil {
		return
	}
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

// On says whether f is in force: false until the group has been described.
func (w *Watch) On(f string) bool {
	a := w.agreed.Load()
	return a != nil && a.On[f]
}

// Run looks at the group until ctx ends. A look that fails keeps what the
// last one found: the membership rarely changes while the group
// coordinator is away, and turning a feature off on every broker restart
// would copy every parked follower into a tier.
func (w *Watch) Run(ctx context.Context) {
	failing := false
	settle := time.Now().Add(w.Settle)
	for {
		if w.look(ctx, &failing) {
			settle = time.Now().Add(w.Settle)
		}
		wait := w.Every
		if time.Now().Before(settle) && !w.allOn() {
			wait = min(wait, w.Quick)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-w.poke:
			t.Stop()
			settle = time.Now().Add(w.Settle)
		case <-t.C:
		}
	}
}

func (w *Watch) allOn() bool {
	for _, f := range All {
		if !w.On(f) {
			return false
		}
	}
	return true
}

// look looks at the group once; changed: a feature turned on or off.
func (w *Watch) look(ctx context.Context, failing *bool) (changed bool) {
	lctx, cancel := context.WithTimeout(ctx, max(w.Every, 5*time.Second))
	defer cancel()
	members, err := w.Describe(lctx)
	if err != nil {
		if ctx.Err() == nil && !*failing {
			w.Log.Warn("could not describe the group to learn which features its members announce; keeping what the last look found", "err", err)
		}
		*failing = true
		return false
	}
	*failing = false
	a := Agree(members)
	prev := w.agreed.Swap(&a)
	for _, f := range All {
		was := prev != nil && prev.On[f]
		if prev != nil && was == a.On[f] && slices.Equal(prev.Without[f], a.Without[f]) {
			continue
		}
		w.report(f, a, prev == nil || was != a.On[f])
		changed = changed || was != a.On[f]
	}
	return changed
}

// report logs f's state (at Warn when it turned off, or stays off under
// other members), and tells Changed when it changed.
func (w *Watch) report(f string, a Agreement, changed bool) {
	switch {
	case a.On[f]:
		w.Log.Info("feature in force: every member of the group announces it", "feature", f)
	case len(a.Without[f]) == 0:
		w.Log.Info("feature off: the group has no member yet", "feature", f)
	default:
		w.Log.Warn("feature off: members of the group do not announce it (a relay from before 0.7.0, one with the feature turned off, or another client in the group); it turns on by itself once every member announces it",
			"feature", f, "without", strings.Join(a.Without[f], ","))
	}
	if changed && w.Changed != nil {
		w.Changed(f, a.On[f])
	}
}
