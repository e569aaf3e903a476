package console

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"
)

// Tokens from every client together: a guess spread over many addresses
// (an attacker's, or clients the ingress lets pick their own
// X-Forwarded-For) passes every client's limit. Every token tried takes
// one of maxWrongInAll tries, which come back one every
// lockFor/maxWrongInAll (15 s), and a right token gives its try back;
// when none is left, the console takes no token from anyone for lockFor.
// So wrong tokens pass at most maxWrongInAll in lockFor, at any pace and
// from any number of clients: 5,760 a day. Sessions and the
// authenticating proxy's users are not affected.
const (
	maxWrongInAll    = 60
	lockFor          = 15 * time.Minute
	wrongInAllWindow = lockFor
)

// everyone is the limit on tokens from all clients together, and what
// the console's metrics say of tokens.
type everyone struct {
	mu     sync.Mutex
	lim    *rate.Limiter
	until  time.Time // no token taken before it
	locked bool

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
		Help: "1 while the console takes no token from anyone (15 minutes, after more than 60 wrong tokens within 15 minutes from every client together)."})
	e.reg.MustRegister(e.wrong, e.refused, e.lockedGauge)
	return e
}

// reserve takes a try for a token now, or says no; started says a lock
// began with this call (to be logged once). A try that was right is
// given back (release).
func (e *everyone) reserve(now time.Time) (res *rate.Reservation, ok, started bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.Before(e.until) {
		e.refused.Inc()
		return nil, false, false
	}
	res = e.lim.ReserveN(now, 1)
	if !res.OK() || res.DelayFrom(now) > 0 {
		res.CancelAt(now)
		e.until = now.Add(lockFor)
		started = !e.locked
		e.locked = true
		e.lockedGauge.Set(1)
		e.refused.Inc()
		return nil, false, started
	}
	e.locked = false
	e.lockedGauge.Set(0)
	return res, true, false
}

// release settles a try: a right token's is given back, a wrong one's
// counted.
func (e *everyone) release(res *rate.Reservation, right bool, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if right {
		if res != nil {
			res.CancelAt(now)
		}
		return
	}
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

// HealthHandler serves /healthz and /metrics and nothing else: a second
// listener's (RELAY_CONSOLE_METRICS_ADDR), for the kubelet's probes and
// Prometheus when the console's own address is on loopback.
func (s *Server) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.auth.all.reg, promhttp.HandlerOpts{}))
	return mux
}

// Metrics are the metrics a console exports at /metrics, as a console
// that just started has them (for checks of the alert rules).
func Metrics() prometheus.Gatherer { return newEveryone().reg }
