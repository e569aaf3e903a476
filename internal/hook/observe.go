package hook

import (
	"net/http"
	"time"

	"relay/internal/secret"
)

// Observer hears every HTTP request relay sends the hook: when it starts,
// and when it ends, with what came of it (outcomeOf) and how long it took
// to the whole answer.
type Observer interface {
	HookStarted()
	HookEnded(outcome string, d time.Duration)
}

// Observe sets who hears the requests. Call it before the first call.
func (c *Client) Observe(o Observer) { c.obs = o }

// observe starts measuring one request; the function it returns ends it
// with the answer's status, or the error that stood for an answer.
func (c *Client) observe() func(status int, err error) {
	if c.obs == nil {
		return func(int, error) {}
	}
	start := time.Now()
	c.obs.HookStarted()
	return func(st int, err error) { c.obs.HookEnded(outcomeOf(st, err), time.Since(start)) }
}

// outcomeOf names what came of a request, from a bounded set (a metric
// label).
func outcomeOf(st int, err error) string {
	switch {
	case err != nil && timeout(err):
		return "timeout"
	case err != nil:
		return "error"
	case st == http.StatusOK || st == http.StatusNoContent:
		return "ok"
	case st == http.StatusUnprocessableEntity:
		return "rejected"
	case st == http.StatusBadRequest:
		return "invalid"
	case st == http.StatusTooManyRequests:
		return "rate_limited"
	case secret.RefusedStatus(st):
		return "refused"
	case st >= 500:
		return "unavailable"
	}
	return "unexpected"
}
