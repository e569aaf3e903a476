package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"relay/internal/replay"
)

// keepRuns is how many ended replays the console keeps for their pages.
const keepRuns = 20

// replayRun is one replay the console started: the same workflow as
// `relay replay`, its progress told to the pages that follow it.
type replayRun struct {
	ID, Actor, Reason, Selection string
	Started                      time.Time
	Rate                         float64
	// Watching are the stop conditions the replay watches.
	Watching []string

	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	phase     string // preparing, running, ended
	counts    replay.Counts
	note      string
	status    string
	stoppedBy string
	warnings  []string      // what the replay warned of, e.g. a stop condition it cannot watch
	changed   chan struct{} // closed and replaced at every change
	told      time.Time
}

// View is a run's state for pages and events.
type runView struct {
	ID        string        `json:"replayId"`
	Phase     string        `json:"phase"`
	Counts    replay.Counts `json:"counts"`
	Percent   int           `json:"percent"`
	Note      string        `json:"note,omitempty"`
	Status    string        `json:"status,omitempty"`
	StoppedBy string        `json:"stoppedBy,omitempty"`
	Warnings  []string      `json:"warnings,omitempty"`
}

func (r *replayRun) view() runView {
	r.mu.Lock()
	defer r.mu.Unlock()
	return runView{ID: r.ID, Phase: r.phase, Counts: r.counts, Percent: 100 * r.counts.Published / max(r.counts.Total, 1),
		Note: r.note, Status: r.status, StoppedBy: r.stoppedBy, Warnings: append([]string(nil), r.warnings...)}
}

// View is the run's state, for templates.
func (r *replayRun) View() runView { return r.view() }

// Running says whether the run has not ended.
func (r *replayRun) Running() bool { return r.view().Phase != "ended" }

func (r *replayRun) tell(force bool) {
	if !force && time.Since(r.told) < 200*time.Millisecond {
		return
	}
	r.told = time.Now()
	close(r.changed)
	r.changed = make(chan struct{})
}

// Update implements replay.Progress.
func (r *replayRun) Update(c replay.Counts) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts, r.phase = c, "running"
	r.tell(false)
}

// Done implements replay.Progress.
func (r *replayRun) Done(c replay.Counts) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts = c
	r.tell(true)
}

func (r *replayRun) end(status, note string, c *replay.Counts) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c != nil {
		r.counts = *c
	}
	r.phase, r.status, r.note = "ended", status, note
	r.tell(true)
}

// wait returns a channel closed at the run's next change.
func (r *replayRun) wait() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// replays are the console's replays: one runs at a time.
type replays struct {
	mu      sync.Mutex
	runs    map[string]*replayRun
	wg      sync.WaitGroup
	closing bool // the console stops: no replay starts
}

func newReplays() *replays { return &replays{runs: map[string]*replayRun{}} }

func (m *replays) get(id string) *replayRun {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runs[id]
}

// list is the runs, running first, then the latest.
func (m *replays) list() []*replayRun {
	m.mu.Lock()
	out := make([]*replayRun, 0, len(m.runs))
	for _, r := range m.runs {
		out = append(out, r)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		ri, rj := out[i].Running(), out[j].Running()
		if ri != rj {
			return ri
		}
		return out[i].Started.After(out[j].Started)
	})
	return out
}

// start runs body as replay r unless another is running (then it returns
// that one) or the console stops.
func (m *replays) start(r *replayRun, body func(ctx context.Context)) (*replayRun, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return nil, errors.New("the console is stopping: no replay starts")
	}
	for _, o := range m.runs {
		if o.Running() {
			return o, nil
		}
	}
	if len(m.runs) >= keepRuns {
		var oldest *replayRun
		for _, o := range m.runs {
			if oldest == nil || o.Started.Before(oldest.Started) {
				oldest = o
			}
		}
		delete(m.runs, oldest.ID)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done, r.changed, r.phase = cancel, make(chan struct{}), make(chan struct{}), "preparing"
	m.runs[r.ID] = r
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(r.done)
		defer cancel()
		body(ctx)
	}()
	return nil, nil
}

// stopAll interrupts the replays, lets none start any more, and waits
// for them to end (what was published stays replaying), up to a bound.
func (m *replays) stopAll() {
	m.mu.Lock()
	m.closing = true
	for _, r := range m.runs {
		r.cancel()
	}
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopBound):
	}
}

// stopBound bounds the wait for interrupted replays: their last
// transaction, and their spans' flush (5 s).
const stopBound = 20 * time.Second

// runReplay is the body of a console replay: prepare (fencing an earlier
// replay of the group), then run, exactly as `relay replay` does.
func (s *Server) runReplay(ctx context.Context, r *replayRun, o *replay.Options) {
	log := s.log.With("replay", r.ID, "actor", r.Actor)
	defer s.invalidate() // the replay changes the quarantine
	plan, err := replay.Prepare(ctx, s.cfg, s.o.Admin, o, time.Now())
	if err != nil {
		r.mu.Lock()
		by := r.stoppedBy
		r.mu.Unlock()
		if by != "" && ctx.Err() != nil {
			r.end("stopped", "stopped by "+by+" before anything was published", nil)
			return
		}
		r.end("failed", "nothing was replayed: "+err.Error(), nil)
		log.Error("replay not started", "err", err)
		return
	}
	defer plan.Close()
	if len(plan.Selection.Records) == 0 {
		r.end("done", "nothing to replay: 0 failures selected"+replay.Skips(plan.Selection.Skipped), nil)
		return
	}
	r.mu.Lock()
	r.counts.Total = len(plan.Selection.Records)
	r.mu.Unlock()
	res, err := plan.Run(ctx, o, r.ID, logWriter{log, r}, r)
	if err != nil {
		r.end("failed", "nothing was replayed: "+err.Error(), nil)
		log.Error("replay failed", "err", err)
		return
	}
	status := [...]string{replay.Done: "done", replay.Stopped: "stopped", replay.Incomplete: "incomplete",
		replay.Interrupted: "interrupted", replay.Failed: "failed"}[res.Status]
	note := res.Note
	if note == "" {
		note = fmt.Sprintf("done: %d published, %d resolved, %d rejected, %d failed again, %d duplicates", res.Published, res.Resolved,
			res.Rejected, res.FailedAgain, res.Duplicate)
	}
	r.mu.Lock()
	if r.stoppedBy != "" && res.Status == replay.Interrupted {
		note = "stopped by " + r.stoppedBy + " — " + strings.TrimPrefix(note, "interrupted: ")
	}
	r.mu.Unlock()
	r.end(status, note, &res.Counts)
	log.Info("replay ended", "status", status, "note", note, "published", res.Published, "resolved", res.Resolved, "failed_again", res.FailedAgain)
}

// logWriter writes the replay's lines to the console's log, and its
// warnings also to its page.
type logWriter struct {
	log *slog.Logger
	run *replayRun
}

func (l logWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if w, ok := strings.CutPrefix(line, "warning: "); ok {
			l.log.Warn(w)
			l.run.mu.Lock()
			l.run.warnings = append(l.run.warnings, w)
			l.run.tell(true)
			l.run.mu.Unlock()
			continue
		}
		if line != "" {
			l.log.Info(line)
		}
	}
	return len(p), nil
}

// replayEvents streams a run's progress as server-sent events: a
// "progress" event at each change, "end" when it has ended.
func (s *Server) replayEvents(w http.ResponseWriter, r *http.Request) {
	run := s.replays.get(r.PathValue("id"))
	if run == nil {
		http.Error(w, "no such replay in this console", http.StatusNotFound)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	who := s.streamKey(r)
	if code, why := s.streams.open(who); code != 0 {
		http.Error(w, why, code)
		return
	}
	defer s.streams.close(who)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		ch := run.wait()
		v := run.view()
		b, _ := json.Marshal(v)
		event := "progress"
		if v.Phase == "ended" {
			event = "end"
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return
		}
		fl.Flush()
		if event == "end" {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-ch:
		case <-keepalive.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// streamKey is whose live progress streams r's counts among: a signed-in
// session's, a user's of the authenticating proxy (every user reaches the
// console from the proxy's address: keyed on it, they shared one quota),
// else its client's.
func (s *Server) streamKey(r *http.Request) string {
	switch u := s.auth.identify(r); {
	case u.session != "":
		return "session " + u.session
	case u.How == "proxy":
		return "user " + u.Actor
	}
	return "client " + s.auth.client(r)
}

// Live progress streams held open at once: a few per session (or user,
// or client),
// a bound overall, so that readers cannot tie up the console's
// connections.
const (
	maxStreamsPer = 4
	maxStreams    = 64
)

type streams struct {
	mu  sync.Mutex
	by  map[string]int
	all int
}

func newStreams() *streams { return &streams{by: map[string]int{}} }

// open takes a stream for who, or says why not (an HTTP status and a
// message).
func (s *streams) open(who string) (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.all >= maxStreams:
		return http.StatusServiceUnavailable, "too many live progress streams open on this console; reload later"
	case s.by[who] >= maxStreamsPer:
		return http.StatusTooManyRequests, fmt.Sprintf("you have %d live progress streams open already; close a tab", maxStreamsPer)
	}
	s.all++
	s.by[who]++
	return 0, ""
}

func (s *streams) close(who string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all--
	if s.by[who]--; s.by[who] <= 0 {
		delete(s.by, who)
	}
}
