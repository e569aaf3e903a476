package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"relay/internal/config"
	"relay/internal/quarantine"
	"relay/internal/schema"
	"relay/internal/topics"
)

//go:embed assets
var assets embed.FS

// contentSecurity is every page's Content-Security-Policy: nothing inline,
// scripts and styles only from the console itself, no framing.
const contentSecurity = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// DefaultRefresh is how old the snapshot a page shows may be.
const DefaultRefresh = 30 * time.Second

// Options are what the console serves and how.
type Options struct {
	Config *config.Config
	Admin  topics.Admin
	// Registry decodes payloads for the failure page (nil: raw bytes).
	Registry *schema.Client
	Log      *slog.Logger
	// Refresh is how old a snapshot may be before a page reads a new one.
	Refresh time.Duration
	// AllowedHosts, when set, are the only Host names (without port) the
	// console answers: on loopback, a page of another site that rebinds
	// its name to 127.0.0.1 (DNS rebinding) is refused.
	AllowedHosts []string
	// Loopback says the console listens on loopback only: its session
	// cookie may then go without TLS (elsewhere it is Secure, __Host-).
	Loopback bool
}

// Server is the console's HTTP handler.
type Server struct {
	o       Options
	cfg     *config.Config
	log     *slog.Logger
	auth    *auth
	pages   map[string]*template.Template
	replays *replays
	// dryRuns and reads bound the work readers and actors can start at
	// once: a dry run holds its selection's records; a failure's page
	// opens a consumer.
	// requests bounds each client's rate; streams the live progress
	// streams open at once.
	requests *guesses
	streams  *streams
	dryRuns  chan struct{}
	reads    chan struct{}

	mu       sync.Mutex
	reader   *quarantine.Reader
	stale    bool
	warnOnce sync.Once
	// refreshing says a catch-up runs beside the pages; bg is those
	// catch-ups, stopped by Close.
	refreshing atomic.Bool
	bg         sync.WaitGroup
	bgCtx      context.Context
	bgStop     context.CancelFunc
	// summary is the overview's last pass over the quarantine.
	summary summary
}

// New builds the console.
func New(o Options) (*Server, error) {
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	token := func() string { return "" }
	if t := o.Config.Console.Token; t != nil {
		token = t.Get
	}
	s := &Server{o: o, cfg: o.Config, log: o.Log,
		auth:    newAuth(token, o.Config.Console.UserHeader, o.Config.Console.TrustedProxies, o.Loopback),
		replays: newReplays(), dryRuns: make(chan struct{}, 1), reads: make(chan struct{}, 4),
		requests: newRequests(maxTracked), streams: newStreams()}
	s.auth.forwarders = o.Config.Console.ForwardedBy
	s.auth.insecure = o.Config.Console.Insecure
	s.auth.onLock = func() {
		s.log.Error(fmt.Sprintf("the console takes no token from anyone for %s: more than %d wrong tokens within 15 minutes from every client together (a guess spread over many addresses?); signed-in sessions and the authenticating proxy's users are not affected", lockFor, maxWrongInAll))
	}
	s.bgCtx, s.bgStop = context.WithCancel(context.Background())
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	s.pages = pages
	return s, nil
}

// Close stops the replays in progress and the quarantine's catch-up, and
// waits for them to end.
func (s *Server) Close() {
	s.bgStop()
	s.replays.stopAll()
	s.bg.Wait()
}

// Handler serves the console.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets/static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.overview)
	mux.HandleFunc("GET /failures", s.list)
	mux.HandleFunc("GET /failure", s.detail)
	mux.HandleFunc("GET /replay", s.replayForm)
	mux.HandleFunc("GET /replays/{id}", s.replayPage)
	mux.HandleFunc("GET /replays/{id}/events", s.replayEvents)
	mux.HandleFunc("GET /login", s.loginForm)
	mux.HandleFunc("POST /login", s.login)
	mux.HandleFunc("POST /logout", s.logout)
	mux.HandleFunc("POST /discard", s.act(s.discard))
	mux.HandleFunc("POST /replay/choose", s.chooseReplay)
	mux.HandleFunc("POST /replay/dry-run", s.act(s.dryRun))
	mux.HandleFunc("POST /replay/start", s.act(s.startReplay))
	mux.HandleFunc("POST /replays/{id}/stop", s.act(s.stopReplay))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("GET /metrics", s.metrics())
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log.Warn("refused a cross-origin request", "method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"))
		s.fail(w, r, http.StatusForbidden, "refused: this request came from another site (cross-site request forgery protection)")
	}))
	inner := s.knownHost(s.throttle(s.secureHeaders(cop.Handler(s.readers(mux)))))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inner.ServeHTTP(w, withIdentity(r)) })
}

// throttle bounds each client's requests (requestRate a second, in
// bursts of requestBurst), the health check excepted: a client past it
// gets 429 and waits.
func (s *Server) throttle(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && !s.requests.allow(s.auth.client(r), time.Now()) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests from your address; slow down", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// scriptAction says whether path is one of the actions a script may post
// with a bearer token (each wrapped in act, which checks it).
func scriptAction(path string) bool {
	switch {
	case path == "/discard", path == "/replay/dry-run", path == "/replay/start":
		return true
	case strings.HasPrefix(path, "/replays/") && strings.HasSuffix(path, "/stop") && strings.Count(path, "/") == 3:
		return true
	}
	return false
}

// readers keeps everything but the sign-in, the health check and the
// static files behind sign-in when reading needs it
// (RELAY_CONSOLE_READ_AUTH): the failures' payloads and history are for
// the people who own them. A bearer token (a script's) counts on actions,
// which check it themselves.
func (s *Server) readers(next http.Handler) http.Handler {
	if !s.cfg.Console.ReadsSignedIn(s.o.Loopback) {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/healthz", p == "/metrics", p == "/login", p == "/logout", strings.HasPrefix(p, "/static/"),
			// A script's actions: act() checks their bearer token itself.
			r.Method == http.MethodPost && r.Header.Get("Authorization") != "" && scriptAction(p):
			next.ServeHTTP(w, r)
			return
		}
		if s.auth.identify(r).CanAct() {
			next.ServeHTTP(w, r)
			return
		}
		if s.auth.token() == "" && s.auth.userHeader == "" {
			s.fail(w, r, http.StatusForbidden, "reading this console needs a signed-in operator, and it has no way to sign in: set RELAY_CONSOLE_TOKEN or an authenticating proxy, or RELAY_CONSOLE_READ_AUTH=open")
			return
		}
		s.render(w, r, http.StatusUnauthorized, "login", "Sign in", nil)
	})
}

// knownHost refuses a request for a Host the console does not answer to.
func (s *Server) knownHost(next http.Handler) http.Handler {
	if len(s.o.AllowedHosts) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The kubelet's probes name the pod's address; and a trusted
		// reverse proxy on this host passes its own Host on, unless the
		// hosts were named (RELAY_CONSOLE_ALLOWED_HOSTS: every listener).
		if r.URL.Path == "/healthz" || r.URL.Path == "/metrics" || (s.auth.fromProxy(r) && len(s.cfg.Console.AllowedHosts) == 0) {
			next.ServeHTTP(w, r)
			return
		}
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
		for _, a := range s.o.AllowedHosts {
			if strings.EqualFold(host, a) {
				next.ServeHTTP(w, r)
				return
			}
		}
		s.log.Warn("refused a request for an unknown host (DNS rebinding?)", "host", r.Host, "remote", r.RemoteAddr)
		http.Error(w, "refused: this console does not answer to "+r.Host, http.StatusMisdirectedRequest)
	})
}

// inClearMsg refuses a token that came over plain HTTP.
const inClearMsg = "refused: the console token would have crossed the network in clear; reach the console over TLS (its ingress), or set RELAY_CONSOLE_INSECURE=true to accept that"

func (s *Server) secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if s.auth.overTLS(r) {
			// Over TLS once, never again in clear (a year).
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		h.Set("Content-Security-Policy", contentSecurity)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if !strings.HasPrefix(r.URL.Path, "/static/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// act wraps an action: the requester must be identified and the form's
// CSRF token theirs.
func (s *Server) act(h func(http.ResponseWriter, *http.Request, who)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if err := r.ParseForm(); err != nil {
			s.fail(w, r, http.StatusBadRequest, "the form cannot be read: "+err.Error())
			return
		}
		u := s.auth.identify(r)
		switch u.How {
		case "refused":
			s.log.Warn("refused a script's action: not the console token", "client", s.auth.client(r), "remote", r.RemoteAddr, "actor", cleanName(r.Header.Get(ActorHeader)))
		case "in clear":
			s.log.Warn("refused a script's action: its token came over plain HTTP (RELAY_CONSOLE_INSECURE)", "client", s.auth.client(r), "remote", r.RemoteAddr)
			s.fail(w, r, http.StatusForbidden, inClearMsg)
			return
		case "throttled":
			s.log.Warn("refused a script's action: too many wrong tokens", "client", s.auth.client(r), "remote", r.RemoteAddr)
			s.fail(w, r, http.StatusTooManyRequests, fmt.Sprintf("refused: %d wrong tokens from your address; try again in a minute", maxFailures))
			return
		}
		if !u.CanAct() {
			s.fail(w, r, http.StatusUnauthorized, "refused: actions need you to sign in (console token) or to come through the authenticating proxy; "+
				"a script sends Authorization: Bearer <RELAY_CONSOLE_TOKEN> and "+ActorHeader+": <its operator's name>")
			return
		}
		if !checkCSRF(u, r) {
			s.fail(w, r, http.StatusForbidden, "refused: the form's CSRF token is missing or not yours; reload the page and try again")
			return
		}
		h(w, r, u)
	}
}

// actor is what the ledger records for u: the name and how it was
// identified. A name typed beside the token (a session, a script's
// bearer token) is whatever its holder typed; the ledger says so.
func actor(u who) string {
	how := u.How
	if how == "bearer" {
		how = "token"
	}
	return u.Actor + " (console, " + how + ")"
}

// snapshot is the quarantine, and as of when. The console reads the
// topics once, then only what was written since: a catch-up costs what
// changed, not the quarantine's size. A page is served from what was read
// and, when that is older than Refresh, a catch-up starts beside it; the
// first page, an action (fresh) and the page after one wait for theirs.
func (s *Server) snapshot(ctx context.Context, fresh bool) (*quarantine.Index, time.Time, error) {
	s.mu.Lock()
	if s.reader == nil {
		s.reader = quarantine.NewReader(s.cfg, s.o.Admin, "")
	}
	r, stale := s.reader, s.stale
	s.mu.Unlock()
	at := r.At()
	if at.IsZero() || fresh || stale {
		if err := s.catchUp(ctx, r, stale); err != nil {
			return nil, at, err
		}
		return r.Index(), r.At(), nil
	}
	if time.Since(at) >= s.o.Refresh && s.refreshing.CompareAndSwap(false, true) {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			defer s.refreshing.Store(false)
			if err := s.catchUp(s.bgCtx, r, false); err != nil && s.bgCtx.Err() == nil {
				s.log.Warn("reading the quarantine", "err", err)
			}
		}()
	}
	return r.Index(), at, nil
}

// catchUp reads what was written since the last catch-up; stale says an
// action asked for it.
func (s *Server) catchUp(ctx context.Context, r *quarantine.Reader, stale bool) error {
	if err := r.CatchUp(ctx); err != nil {
		return err
	}
	if stale {
		s.mu.Lock()
		s.stale = false
		s.mu.Unlock()
	}
	if err := r.Index().Warning(); err != nil {
		s.warnOnce.Do(func() { s.log.Warn("a ledger record cannot be read", "err", err) })
	}
	return nil
}

// invalidate makes the next page read the quarantine again.
func (s *Server) invalidate() {
	s.mu.Lock()
	s.stale = true
	s.mu.Unlock()
}

// page is what every template gets.
type page struct {
	Title   string
	Nav     string
	Who     who
	CanSign bool
	Now     time.Time
	AsOf    time.Time
	Flash   string
	Error   string
	Data    any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	p := page{Title: title, Nav: name, Who: s.auth.identify(r), CanSign: s.auth.token() != "", Now: time.Now(), Data: data,
		Flash: flash(r.URL.Query())}
	if d, ok := data.(interface{ asOf() time.Time }); ok {
		p.AsOf = d.asOf()
	}
	s.renderPage(w, status, name, p)
}

func (s *Server) renderPage(w http.ResponseWriter, status int, name string, p page) {
	t := s.pages[name]
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", p); err != nil {
		s.log.Error("console page failed", "page", name, "err", err)
		http.Error(w, "the page cannot be shown: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// flash is the message of a finished action, from its fixed codes (a
// link cannot make a page say anything else).
func flash(q url.Values) string {
	if q.Get("done") == "discarded" {
		if n, err := strconv.Atoi(q.Get("n")); err == nil && n > 0 {
			return fmt.Sprintf("Discarded %d failures; the ledger records who and why.", n)
		}
	}
	return ""
}

// fail shows an error page with status.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p := page{Title: http.StatusText(status), Nav: "error", Who: s.auth.identify(r), CanSign: s.auth.token() != "", Now: time.Now(), Error: msg}
	s.renderPage(w, status, "error", p)
}

// failErr shows err: a request to change (an *InputError) or a failure.
func (s *Server) failErr(w http.ResponseWriter, r *http.Request, what string, err error) {
	var ie *quarantine.InputError
	if errors.As(err, &ie) {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%s: %v", what, err))
		return
	}
	s.log.Error(what, "err", err)
	s.fail(w, r, http.StatusBadGateway, fmt.Sprintf("%s: %v", what, err))
}
