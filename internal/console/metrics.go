package console

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"
)

// Wrong tokens from every client together: a guess spread over many
// addresses (an attacker's, or clients the ingress lets pick their own
// X-Forwarded-For) passes every client's limit; past this one, the console
// takes no token from anyone for a while. Sessions and the authenticating
// proxy's users are not affected.
const (
	maxWrongInAll    = 60
	wrongInAllWindow = time.Minute
)

// everyone is the limit on wrong tokens from all clients together, and
// what the console's metrics say of tokens.
type everyone struct {
	mu     sync.Mutex
	lim    *rate.Limiter
	locked bool
	// lockedAt is when the latest lock began (for its one log line).
	lockedAt time.Time

	reg         *prometheus.Registry
	wrong       prometheus.Counter
	refused     prometheus.Counter
	lockedGauge prometheus.Gauge
}

func newEveryone() *everyone {
	e := &everyone{lim: rate.NewLimiter(rate.Every(wrongInAllWindow/maxWrongInAll), maxWrongInAll), reg: prometheus.NewRegistry()}
	e.wrong = prometheus.NewCounter(prometheus.CounterOpts{Name: "relay_console_wrong_tokens_total",
		Help: "Wrong console tokens given, at sign-in or as a script's bearer token, from every client."})
	e.refused = prometheus.NewCounter(prometheus.CounterOpts{Name: "relay_console_tokens_refused_total",
		Help: "Tokens not even checked: their client, or every client together, gave too many wrong ones."})
	e.lockedGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "relay_console_tokens_locked",
		Help: "1 while the console takes no token from anyone: more than 60 wrong tokens a minute from every client together."})
	e.reg.MustRegister(e.wrong, e.refused, e.lockedGauge)
	return e
}

// mayTry says whether anyone may give a token now; started says a lock
// began with this call (to be logged once).
func (e *everyone) mayTry(now time.Time) (ok, started bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ok = e.lim.TokensAt(now) >= 1
	started = !ok && !e.locked
	if started {
		e.lockedAt = now
	}
	e.locked = !ok
	e.lockedGauge.Set(map[bool]float64{true: 1, false: 0}[e.locked])
	if !ok {
		e.refused.Inc()
	}
	return ok, started
}

// wrongToken counts a wrong token against everyone's limit.
func (e *everyone) wrongToken(now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lim.AllowN(now, 1)
	e.wrong.Inc()
}

// metrics serves the console's own metrics, to a scraper reaching the
// console directly only: a request through the ingress or the
// authenticating proxy gets 404.
func (s *Server) metrics() http.Handler {
	h := promhttp.HandlerFor(s.auth.all.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if viaSocket(r) || s.auth.forwarded(r) || r.Header.Get("X-Forwarded-For") != "" {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Metrics are the metrics a console exports at /metrics, as a console
// that just started has them (for checks of the alert rules).
func Metrics() prometheus.Gatherer { return newEveryone().reg }
