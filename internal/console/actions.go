package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"relay/internal/ledger"
	"relay/internal/quarantine"
	"relay/internal/replay"
)

func (s *Server) loginForm(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", "Sign in", nil)
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	name := cleanName(r.PostFormValue("name"))
	if name == "" {
		s.fail(w, r, http.StatusBadRequest, "your name is required: the ledger records who acts")
		return
	}
	now := time.Now()
	if s.auth.inClear(r) {
		s.log.Warn("console sign-in refused: the token came over plain HTTP (RELAY_CONSOLE_INSECURE)", "client", s.auth.client(r), "remote", r.RemoteAddr)
		s.fail(w, r, http.StatusForbidden, inClearMsg)
		return
	}
	if !s.auth.mayTry(r, now) {
		s.log.Warn("console sign-in refused: too many wrong tokens", "client", s.auth.client(r), "remote", r.RemoteAddr)
		s.fail(w, r, http.StatusTooManyRequests, fmt.Sprintf("refused: %d wrong tokens from your address; try again in a minute", maxFailures))
		return
	}
	c, ok := s.auth.signIn(name, r.PostFormValue("token"), r)
	s.auth.tried(r, ok, now)
	if !ok {
		s.log.Warn("console sign-in refused: not the console token", "name", name, "client", s.auth.client(r), "remote", r.RemoteAddr)
		s.fail(w, r, http.StatusUnauthorized, "refused: that is not the console token (RELAY_CONSOLE_TOKEN)")
		return
	}
	s.log.Info("console sign-in", "name", name, "remote", r.RemoteAddr)
	http.SetCookie(w, c)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	// The session ends here, not only in this browser: a copy of the
	// cookie is refused too, until it would have expired.
	if name, exp, sig, ok := s.auth.session(r); ok {
		until, _ := strconv.ParseInt(exp, 10, 64)
		s.auth.revoke(sig, until)
		s.log.Info("console sign-out", "name", name, "client", s.auth.client(r))
	}
	http.SetCookie(w, &http.Cookie{Name: s.auth.cookieName(r), Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.auth.secure(r),
		SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// discard closes the selected failures with a reason, as `relay
// quarantine discard` does, on a fresh snapshot.
func (s *Server) discard(w http.ResponseWriter, r *http.Request, u who) {
	d := &quarantine.Discard{IDs: r.PostForm["ids"], Actor: actor(u), Reason: cleanReason(r.PostFormValue("reason")),
		IncludeReplaying: r.PostFormValue("include-replaying") == "1"}
	if err := checkReason(d.Reason); err != nil {
		s.fail(w, r, http.StatusBadRequest, "nothing was discarded: "+err.Error())
		return
	}
	if err := d.Check(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "nothing was discarded: "+plain(err))
		return
	}
	snap, _, err := s.snapshot(r.Context(), true)
	if err != nil {
		s.failErr(w, r, "reading the quarantine", err)
		return
	}
	_, err = d.Apply(r.Context(), s.cfg, snap)
	s.invalidate()
	if err != nil {
		var ie *quarantine.InputError
		if errors.As(err, &ie) {
			s.fail(w, r, http.StatusConflict, "nothing was discarded: "+plain(err))
			return
		}
		s.failErr(w, r, "nothing was discarded", err)
		return
	}
	s.log.Info("discarded", "actor", d.Actor, "reason", d.Reason, "failures", len(d.IDs))
	back := r.PostFormValue("back")
	if !localPath(back) {
		back = "/failures"
	}
	sep := "?"
	if strings.Contains(back, "?") {
		sep = "&"
	}
	http.Redirect(w, r, back+sep+"done=discarded&n="+strconv.Itoa(len(d.IDs)), http.StatusSeeOther)
}

// maxReason bounds a reason, in characters: the ledger keeps it in every
// change it writes.
const maxReason = 500

func checkReason(why string) error {
	if n := utf8.RuneCountInString(why); n > maxReason {
		return fmt.Errorf("the reason is %d characters long; at most %d", n, maxReason)
	}
	return nil
}

// cleanReason keeps a reason fit for the ledger and for terminals that
// print it: no control characters but line breaks, no format characters.
func cleanReason(why string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if (unicode.IsControl(r) && r != '\n') || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return -1
		}
		return r
	}, why))
}

// localPath says whether back is a path of the console's own, never a
// way to another site (//host, /\host, or a control character browsers
// drop: "/\t/host").
func localPath(back string) bool {
	if !strings.HasPrefix(back, "/") || strings.Contains(back, `\`) ||
		strings.ContainsFunc(back, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return false
	}
	u, err := url.Parse(back)
	return err == nil && u.Scheme == "" && u.Host == "" && !strings.HasPrefix(u.Path, "//")
}

// plain drops the command-line dashes from an error for the page.
func plain(err error) string { return strings.ReplaceAll(err.Error(), "--", "") }

type replayFormData struct {
	Q          url.Values
	IDs        []string
	All        bool
	Matching   int
	Defaults   replay.Options
	Form       url.Values
	Prediction *replay.Prediction
	Error      string
	Running    *replayRun
	at         time.Time
}

func (d replayFormData) asOf() time.Time { return d.at }

// Field is the form's value of name, or def.
func (d replayFormData) Field(name, def string) string {
	if v := d.Form.Get(name); v != "" {
		return v
	}
	return def
}

// replayForm shows the replay form for the selection in the address:
// only the filter and ids come from it (a link cannot preset the rate,
// the stop conditions or the reason).
func (s *Server) replayForm(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	form := filterQuery(q)
	if ids := q["ids"]; len(ids) > 0 {
		form["ids"] = ids
	}
	s.renderReplayForm(w, r, http.StatusOK, form, nil, "")
}

// chooseReplay shows the replay form for the failures chosen on a list.
func (s *Server) chooseReplay(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the form cannot be read: "+err.Error())
		return
	}
	s.renderReplayForm(w, r, http.StatusOK, url.Values{"ids": r.PostForm["ids"]}, nil, "")
}

func (s *Server) renderReplayForm(w http.ResponseWriter, r *http.Request, status int, form url.Values, p *replay.Prediction, msg string) {
	d := replayFormData{Q: filterQuery(form), IDs: form["ids"], All: form.Get("all") == "1", Defaults: replay.Defaults(), Form: form,
		Prediction: p, Error: msg}
	for _, run := range s.replays.list() {
		if run.Running() {
			d.Running = run
		}
	}
	if snap, at, err := s.snapshot(r.Context(), false); err == nil {
		d.at = at
		sp := specOf(form)
		if f, err := sp.Build(time.Now()); err == nil {
			ids := map[string]bool{}
			for _, id := range d.IDs {
				ids[id] = true
			}
			f.States = []ledger.State{ledger.Open}
			if len(ids) > 0 || form.Get("include-failed-again") == "1" {
				f.States = append(f.States, ledger.FailedAgain)
			}
			now := time.Now()
			snap.Each(func(fl *quarantine.Failure) bool {
				if (len(ids) == 0 || ids[fl.ID]) && f.Match(fl, now) {
					d.Matching++
				}
				return true
			})
		}
	}
	s.render(w, r, status, "replay", "Replay", d)
}

// replayOptions reads a replay from the form; every problem is named.
func (s *Server) replayOptions(form url.Values, u who, now time.Time) (*replay.Options, error) {
	o := replay.Defaults()
	o.Reason, o.Actor = cleanReason(form.Get("reason")), actor(u)
	o.Filter = specOf(form)
	o.Filter.States = ""
	o.IDs = strings.Join(form["ids"], ",")
	o.All = form.Get("all") == "1"
	o.IncludeFailedAgain = form.Get("include-failed-again") == "1"
	o.SampleOnly = form.Get("sample-only") == "1"
	o.WatchMetrics = s.cfg.WatchMetrics
	var errs []error
	num := func(name string, set func(string) error) {
		if v := strings.TrimSpace(form.Get(name)); v != "" {
			if err := set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s %q: not a number", name, v))
			}
		}
	}
	num("sample", func(v string) (err error) { o.Sample, err = strconv.Atoi(v); return })
	num("rate", func(v string) (err error) { o.Rate, err = strconv.ParseFloat(v, 64); return })
	num("max-failure-rate", func(v string) error {
		pct, err := strconv.ParseFloat(v, 64)
		o.MaxFailureRate = pct / 100
		return err
	})
	num("max-replay-lag", func(v string) (err error) { o.MaxReplayLag, err = strconv.ParseInt(v, 10, 64); return })
	num("max-duplicates", func(v string) (err error) { o.MaxDuplicates, err = strconv.Atoi(v); return })
	num("max-hook-timeouts", func(v string) (err error) { o.MaxHookTimeouts, err = strconv.Atoi(v); return })
	num("min-outcomes", func(v string) (err error) { o.MinOutcomes, err = strconv.Atoi(v); return })
	num("wait", func(v string) error {
		sec, err := strconv.Atoi(v)
		o.Wait = time.Duration(sec) * time.Second
		return err
	})
	if err := o.Check(now); err != nil {
		errs = append(errs, err)
	}
	if err := checkReason(o.Reason); err != nil {
		errs = append(errs, err)
	}
	if err := quarantine.CheckSource(s.cfg, o.Filter.Source); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.New(plain(errors.Join(errs...)))
	}
	return &o, nil
}

// dryRun runs today's admission and rules on the selection and writes
// nothing, as `relay replay --dry-run` does.
func (s *Server) dryRun(w http.ResponseWriter, r *http.Request, u who) {
	now := time.Now()
	o, err := s.replayOptions(r.PostForm, u, now)
	if err != nil {
		s.renderReplayForm(w, r, http.StatusBadRequest, r.PostForm, nil, err.Error())
		return
	}
	o.DryRun = true
	select {
	case s.dryRuns <- struct{}{}:
		defer func() { <-s.dryRuns }()
	default:
		s.renderReplayForm(w, r, http.StatusConflict, r.PostForm, nil, "another dry run is running (it holds its selection's records): try again in a moment")
		return
	}
	plan, err := replay.Prepare(r.Context(), s.cfg, s.o.Admin, o, now)
	if err != nil {
		s.renderReplayForm(w, r, http.StatusBadRequest, r.PostForm, nil, "dry run: "+plain(err))
		return
	}
	defer plan.Close()
	p, err := plan.Predict(r.Context(), o)
	if err != nil {
		s.renderReplayForm(w, r, http.StatusBadGateway, r.PostForm, nil, "dry run: "+plain(err))
		return
	}
	s.renderReplayForm(w, r, http.StatusOK, r.PostForm, p, "")
}

// startReplay starts a replay in the background and shows its page.
func (s *Server) startReplay(w http.ResponseWriter, r *http.Request, u who) {
	now := time.Now()
	o, err := s.replayOptions(r.PostForm, u, now)
	if err != nil {
		s.renderReplayForm(w, r, http.StatusBadRequest, r.PostForm, nil, err.Error())
		return
	}
	sel := "Failures with " + filterQuery(r.PostForm).Encode()
	if ids := r.PostForm["ids"]; len(ids) > 0 {
		sel = fmt.Sprintf("%d failures chosen", len(ids))
	} else if o.All {
		sel = "every open failure"
	}
	run := &replayRun{ID: replay.NewID(now), Actor: o.Actor, Reason: o.Reason, Selection: sel, Started: now, Rate: o.Rate, Watching: o.Watching()}
	other, err := s.replays.start(run, func(ctx context.Context) { s.runReplay(ctx, run, o) })
	if err != nil {
		s.renderReplayForm(w, r, http.StatusServiceUnavailable, r.PostForm, nil, err.Error())
		return
	}
	if other != nil {
		s.renderReplayForm(w, r, http.StatusConflict, r.PostForm, nil,
			fmt.Sprintf("replay %s by %s is running: wait for it or stop it; one replay runs at a time", other.ID, other.Actor))
		return
	}
	s.log.Info("replay started", "replay", run.ID, "actor", run.Actor, "reason", run.Reason, "selection", sel)
	http.Redirect(w, r, "/replays/"+run.ID, http.StatusSeeOther)
}

func (s *Server) stopReplay(w http.ResponseWriter, r *http.Request, u who) {
	run := s.replays.get(r.PathValue("id"))
	if run == nil {
		s.fail(w, r, http.StatusNotFound, "no such replay in this console")
		return
	}
	run.mu.Lock()
	if run.phase != "ended" {
		run.stoppedBy = actor(u)
	}
	run.mu.Unlock()
	run.cancel()
	s.log.Info("replay stopped", "replay", run.ID, "by", actor(u))
	http.Redirect(w, r, "/replays/"+run.ID, http.StatusSeeOther)
}

func (s *Server) replayPage(w http.ResponseWriter, r *http.Request) {
	run := s.replays.get(r.PathValue("id"))
	if run == nil {
		s.fail(w, r, http.StatusNotFound, "no such replay in this console (the console keeps its last 20; the ledger keeps every replay)")
		return
	}
	s.render(w, r, http.StatusOK, "run", "Replay "+run.ID, run)
}
