package console

import (
	"container/list"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Wrong tokens: a client may give maxFailures of them at once, then one
// every failureWindow/maxFailures; a right token forgets its past. Sign-in
// forms and scripts' bearer tokens count alike.
const (
	maxFailures   = 5
	failureWindow = time.Minute
	maxTracked    = 100000 // clients remembered at most: the least recent go first
)

// guesses is a limiter per client, bounded: an LRU of maxTracked clients,
// so that remembering one more is O(1), never a scan. Wrong tokens use
// one (newGuesses); requests as a whole another (newRequests).
type guesses struct {
	mu    sync.Mutex
	order *list.List // of *guesser, the most recent first
	by    map[string]*list.Element
	max   int
	every rate.Limit
	burst int
}

type guesser struct {
	client string
	lim    *rate.Limiter
}

func newGuesses(max int) *guesses {
	return &guesses{order: list.New(), by: map[string]*list.Element{}, max: max, every: rate.Every(failureWindow / maxFailures), burst: maxFailures}
}

// Requests: a client may make requestBurst at once, then requestRate a
// second: a person clicking and a page's event stream stay far below, a
// script hammering the console (each overview may read the quarantine)
// does not.
const (
	requestRate  = 20
	requestBurst = 60
)

func newRequests(max int) *guesses {
	return &guesses{order: list.New(), by: map[string]*list.Element{}, max: max, every: requestRate, burst: requestBurst}
}

// allow spends one of client's requests, if it has one.
func (g *guesses) allow(client string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.touch(client).lim.AllowN(now, 1)
}

// touch is client's limiter, made (and the least recent client forgotten
// when full) if it has none; it becomes the most recent.
func (g *guesses) touch(client string) *guesser {
	e := g.by[client]
	if e == nil {
		if g.order.Len() >= g.max {
			last := g.order.Back()
			g.order.Remove(last)
			delete(g.by, last.Value.(*guesser).client)
		}
		e = g.order.PushFront(&guesser{client, rate.NewLimiter(g.every, g.burst)})
		g.by[client] = e
	}
	g.order.MoveToFront(e)
	return e.Value.(*guesser)
}

// mayTry says whether client may give a token now. A client not
// remembered may, unless every client remembered still owes guesses: then
// forgetting one would give it its guesses back (an attacker with many
// addresses, an IPv6 /48, say), so a new client waits too.
func (g *guesses) mayTry(client string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.by[client]
	if e == nil {
		return !g.fullOfDebtors(now)
	}
	return e.Value.(*guesser).lim.TokensAt(now) >= 1
}

// fullOfDebtors says whether the table is full and its least recent
// client still owes guesses (so all of them do, near enough).
func (g *guesses) fullOfDebtors(now time.Time) bool {
	if g.order.Len() < g.max {
		return false
	}
	return g.order.Back().Value.(*guesser).lim.TokensAt(now) < float64(g.burst)
}

// tried notes a token client gave: a wrong one spends one of its guesses.
func (g *guesses) tried(client string, ok bool, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.by[client]
	if ok {
		if e != nil {
			g.order.Remove(e)
			delete(g.by, client)
		}
		return
	}
	if g.by[client] == nil && g.fullOfDebtors(now) {
		return // refused by mayTry; remembering it would free a debtor
	}
	g.touch(client).lim.AllowN(now, 1)
}

// client is who a request comes from, for the limiter: the address the
// proxies say they forwarded for (the right-most address in
// X-Forwarded-For that is not itself a trusted proxy or a forwarder),
// when the peer is one of them or the proxy's socket; else the peer;
// IPv6 addresses by their /64, which one host usually holds whole.
func (a *auth) client(r *http.Request) string {
	addr, ok := addrOf(r.RemoteAddr)
	if a.forwarded(r) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break // a garbled hop: the peer is all that is known
			}
			if h = h.Unmap(); !a.trusted(h) && !a.forwarder(h) {
				addr, ok = h, true
				break
			}
		}
	}
	if !ok {
		return r.RemoteAddr
	}
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

// addrOf is the address of host:port, unmapped.
func addrOf(hostport string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// forwarder says whether ip is one of the forwarders.
func (a *auth) forwarder(ip netip.Addr) bool { return within(a.forwarders, ip) }

// trusted says whether ip is one of the trusted proxies.
func (a *auth) trusted(ip netip.Addr) bool { return within(a.proxies, ip) }

// within says whether one of prefixes holds ip.
func within(prefixes []netip.Prefix, ip netip.Addr) bool {
	return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(ip) })
}
