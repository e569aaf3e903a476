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
	// Quiet: the features' states are not logged (an instance to which
	// none applies).
	Quiet bool

	view atomic.Pointer[view]
	poke chan struct{}
}

// view is what the looks found: the last agreement, since when each
// feature has been off (zero: on, or never seen on or off), and whether
// the looks fail.
type view struct {
	agreed   Agreement
	offSince map[string]time.Time
	// withdrawn: off for Settle at least, as the last look found, and it
	// succeeded.
	withdrawn map[string]bool
	failing   bool
}

// failingAfter is how many looks in a row may fail before On says false:
// a member may have joined meanwhile.
const failingAfter = 3

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

// On says whether f is in force: every member announced it at the last
// look. False until the group has been described, and once failingAfter
// looks in a row have failed.
func (w *Watch) On(f string) bool {
	v := w.view.Load()
	return v != nil && !v.failing && v.agreed.On[f]
}

// Withdrawn says whether f has been off for Settle at least, at every
// look that succeeded: what relies on it is to be undone (parked followers
// copied). A feature off for less (a member just restarted, whose record
// has not been read yet) only stops new uses; so do failed looks.
func (w *Watch) Withdrawn(f string) bool {
	v := w.view.Load()
	return v != nil && !v.failing && v.withdrawn[f]
}

// Run looks at the group until ctx ends.
func (w *Watch) Run(ctx context.Context) {
	failing := 0
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

func (w *Watch) store(v view) { w.view.Store(&v) }

// look looks at the group once; changed: a feature turned on or off.
// failing counts the looks that failed in a row.
func (w *Watch) look(ctx context.Context, failing *int) (changed bool) {
	lctx, cancel := context.WithTimeout(ctx, max(w.Every, 5*time.Second))
	defer cancel()
	members, err := w.Describe(lctx)
	prev := w.view.Load()
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		*failing++
		if *failing == 1 {
			w.Log.Warn("could not look at the group's members and their records; keeping what the last look found", "err", err)
		}
		if prev != nil && !prev.failing && *failing >= failingAfter {
			w.Log.Warn("the group's members could not be read for several looks: nothing new is parked until they can", "looks", *failing, "err", err)
			v := *prev
			v.failing = true
			w.store(v)
			for _, f := range All {
				if prev.agreed.On[f] {
					changed = true
					if w.Changed != nil {
						w.Changed(f, false)
					}
				}
			}
			return changed
		}
		return false
	}
	*failing = 0
	a := Agree(members)
	v := view{agreed: a, offSince: map[string]time.Time{}, withdrawn: map[string]bool{}}
	now := time.Now()
	for _, f := range All {
		if !a.On[f] {
			v.offSince[f] = now
			if prev != nil && !prev.agreed.On[f] {
				if since, ok := prev.offSince[f]; ok {
					v.offSince[f] = since
				}
			}
			v.withdrawn[f] = now.Sub(v.offSince[f]) >= w.Settle
		}
	}
	w.store(v)
	for _, f := range All {
		was := prev != nil && !prev.failing && prev.agreed.On[f]
		if prev != nil && !prev.failing && was == a.On[f] && slices.Equal(prev.agreed.Without[f], a.Without[f]) {
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
	case w.Quiet:
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
