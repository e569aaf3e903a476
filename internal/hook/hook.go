package hook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"relay/internal/secret"
	"relay/internal/tiers"
	"relay/internal/tracing"
)

// maxBody bounds what relay reads of an answer.
const maxBody = 1 << 20

// Request is what relay POSTs.
type Request struct {
	MessageID string         `json:"messageId"`
	Topic     string         `json:"topic"`
	Partition int32          `json:"partition"`
	Offset    int64          `json:"offset"`
	Key       *string        `json:"key"`
	Record    map[string]any `json:"record"`
	// The record's trace context, in the batch protocol only (a call
	// for one record carries it as headers).
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// Client calls one hook endpoint.
type Client struct {
	url     string
	timeout time.Duration
	http    *http.Client
	plain   *http.Client // without tracing, for batches
	base    *http.Transport
	auth    Auth
	access  func(refused bool, status int) // nil: nobody listens
	// timedOut hears of every call that got no answer in time (nil: nobody).
	timedOut func()
	obs      Observer // nil: nobody
	safeURL  string   // url without its secrets, for errors
}

// Auth is how relay authenticates itself to the hook; the zero value sends
// nothing. Token and SigningSecret are asked for their value at every
// call, so a secret rotated in its file is used from the next call on.
type Auth struct {
	// Token, when it gives a value, is sent as Authorization: Bearer.
	Token func() string
	// SigningSecret, when it gives a value, signs every request: see
	// SignatureHeader.
	SigningSecret func() string
	// TLS, when set, is the TLS configuration of the hook's connections:
	// a private CA, a client certificate.
	TLS *tls.Config
}

// SignatureHeader carries relay's HMAC-SHA256 signature of a request:
//
//	Relay-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// A hook verifies it by computing the HMAC of the timestamp as sent, a
// dot and the raw body, comparing in constant time, and refusing a
// timestamp older than its replay window (five minutes is usual).
const SignatureHeader = "Relay-Signature"

// Sign is the value of SignatureHeader for body at t with secret.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Authenticate sets how relay authenticates itself, and access, when not
// nil, hears after each answer whether the hook refused relay's
// credential (401/403) or accepted it (2xx, 400, 422). Call it before the
// first call.
func (c *Client) Authenticate(a Auth, access func(refused bool, status int)) {
	c.auth, c.access = a, access
	if a.TLS != nil {
		c.base.TLSClientConfig = a.TLS
	}
}

// prepare adds the headers every request carries: its type and relay's
// credential.
func (c *Client) prepare(hr *http.Request, body []byte) {
	hr.Header.Set("Content-Type", "application/json")
	if c.auth.Token != nil {
		if t := c.auth.Token(); t != "" {
			hr.Header.Set("Authorization", "Bearer "+t)
		}
	}
	if c.auth.SigningSecret != nil {
		if s := c.auth.SigningSecret(); s != "" {
			hr.Header.Set(SignatureHeader, Sign(s, time.Now(), body))
		}
	}
}

// masked is err with the hook's URL masked (secret.MaskURL): the Go client
// puts the whole URL, query string and all, in its errors, and these go
// to logs and to the failure envelope.
func (c *Client) masked(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = c.safeURL
	}
	return err
}

// failed is the outcome of a request that got no answer: a failed TLS
// handshake is relay's credential (or the hook's certificate) refused;
// anything else (refused, reset, timed out) an outage the hook may come
// back from.
func (c *Client) failed(err error) error {
	if c.timedOut != nil && timeout(err) {
		c.timedOut()
	}
	err = c.masked(err)
	if secret.TLSRefused(err) {
		if c.access != nil {
			c.access(true, 0)
		}
		return tiers.Fail(tiers.CauseHookUnauthorized, fmt.Errorf("TLS handshake with the hook failed: %w", err))
	}
	return tiers.Fail(tiers.CauseHookUnavailable, err)
}

// OnTimeout sets f, called for every call that got no answer within the
// timeout. Call it before the first call.
func (c *Client) OnTimeout(f func()) { c.timedOut = f }

// timeout says whether a call failed for want of an answer in time.
func timeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// heard reports the answer's status to whoever listens for refusals.
func (c *Client) heard(st int) {
	if c.access == nil {
		return
	}
	switch {
	case secret.RefusedStatus(st):
		c.access(true, st)
	case st/100 == 2 || st == http.StatusBadRequest || st == http.StatusUnprocessableEntity:
		c.access(false, st)
	}
}

// New builds a client for url; timeout bounds each call, and concurrency
// is how many calls relay makes at once at most: the client keeps that
// many connections open for them, so none is opened per call. With a
// tracer provider (tp not nil) each call is a client span, a child of
// the span in its context, and carries that context as prop writes it
// (OTEL_PROPAGATORS; nil: traceparent and tracestate).
func New(target string, timeout time.Duration, concurrency int, tp trace.TracerProvider, prop propagation.TextMapPropagator) *Client {
	if prop == nil {
		prop = tracing.Propagator
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = max(concurrency, 2)
	base.MaxIdleConns = max(base.MaxIdleConns, base.MaxIdleConnsPerHost)
	// A redirect is not part of the hook's contract, and is not followed:
	// the record and relay's credential go to the hook and nowhere else
	// (an authenticating proxy's redirect to its login page is a 3xx).
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	plain := &http.Client{Timeout: timeout, Transport: base, CheckRedirect: noRedirect}
	c := plain
	if tp != nil {
		c = &http.Client{Timeout: timeout, CheckRedirect: noRedirect, Transport: otelhttp.NewTransport(base, otelhttp.WithTracerProvider(tp),
			otelhttp.WithPropagators(prop), otelhttp.WithMeterProvider(noop.NewMeterProvider()),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "hook " + r.Method }))}
	}
	return &Client{url: target, timeout: timeout, http: c, plain: plain, base: base, safeURL: secret.MaskURL(target)}
}

// Call sends req. It returns the replacement record when the hook gives
// one, nil when the record is processed as is, or a *tiers.Error.
func (c *Client) Call(ctx context.Context, req *Request) (map[string]any, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, tiers.Failf(tiers.CauseHookInvalidInput, "record cannot be sent as JSON: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("hook request: %w", err)
	}
	c.prepare(hr, body)
	hr.Header.Set("Idempotency-Key", req.MessageID)
	done := c.observe()
	resp, err := c.http.Do(hr)
	if err != nil {
		done(0, err)
		return nil, c.failed(err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	done(resp.StatusCode, err)
	if err != nil {
		if c.timedOut != nil && timeout(err) {
			c.timedOut()
		}
		return nil, tiers.Fail(tiers.CauseHookUnavailable, fmt.Errorf("reading answer: %w", err))
	}
	c.heard(resp.StatusCode)
	return decide(resp.StatusCode, answer, resp.Header.Get("Retry-After"))
}

// decide maps the hook's answer for one record (status, body, the
// Retry-After value) to its outcome: the replacement record, nil to
// process the record as is, or a *tiers.Error.
func decide(st int, answer []byte, retry string) (map[string]any, error) {
	switch {
	case st == http.StatusOK || st == http.StatusNoContent:
		if len(bytes.TrimSpace(answer)) == 0 {
			return nil, nil
		}
		var out struct {
			Record map[string]any `json:"record"`
		}
		// Numbers stay exact (json.Number): a long must not pass
		// through float64.
		dec := json.NewDecoder(bytes.NewReader(answer))
		dec.UseNumber()
		if err := dec.Decode(&out); err != nil {
			return nil, tiers.Failf(tiers.CauseHookUnexpected, "status %d with a body that is not JSON: %v", st, err)
		}
		return out.Record, nil
	case st == http.StatusUnprocessableEntity:
		var out struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(answer, &out) // no code: REJECTED_HOOK
		return nil, &tiers.Error{Cause: tiers.CauseHookReject, Name: out.Code, Err: fmt.Errorf("hook rejected the record (422)")}
	case st == http.StatusBadRequest:
		return nil, tiers.Failf(tiers.CauseHookInvalidInput, "hook answered 400")
	case st == http.StatusTooManyRequests:
		return nil, &tiers.Error{Cause: tiers.CauseHookRateLimited, RetryAfter: retryAfter(retry, time.Now()), Err: errors.New("hook answered 429")}
	case secret.RefusedStatus(st):
		return nil, tiers.Failf(tiers.CauseHookUnauthorized, "hook answered %d: it refuses relay's credential", st)
	case st >= 500:
		return nil, tiers.Failf(tiers.CauseHookUnavailable, "hook answered %d", st)
	default:
		return nil, tiers.Failf(tiers.CauseHookUnexpected, "hook answered %d", st)
	}
}

// retryAfter reads Retry-After (seconds or an HTTP date); 0 if absent or
// unreadable. The budget, not the hook, bounds how long relay waits.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
