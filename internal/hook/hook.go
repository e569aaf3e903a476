package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

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
}

// New builds a client for url; timeout bounds each call, and concurrency
// is how many calls relay makes at once at most: the client keeps that
// many connections open for them, so none is opened per call. With a
// tracer provider (tp not nil) each call is a client span, a child of
// the span in its context, and carries that context (traceparent,
// tracestate).
func New(url string, timeout time.Duration, concurrency int, tp trace.TracerProvider) *Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = max(concurrency, 2)
	base.MaxIdleConns = max(base.MaxIdleConns, base.MaxIdleConnsPerHost)
	plain := &http.Client{Timeout: timeout, Transport: base}
	c := plain
	if tp != nil {
		c = &http.Client{Timeout: timeout, Transport: otelhttp.NewTransport(base, otelhttp.WithTracerProvider(tp),
			otelhttp.WithPropagators(tracing.Propagator), otelhttp.WithMeterProvider(noop.NewMeterProvider()),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "hook " + r.Method }))}
	}
	return &Client{url: url, timeout: timeout, http: c, plain: plain}
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
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Idempotency-Key", req.MessageID)
	resp, err := c.http.Do(hr)
	if err != nil {
		// Refused, reset, timed out: the hook may come back.
		return nil, tiers.Fail(tiers.CauseHookUnavailable, err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, tiers.Fail(tiers.CauseHookUnavailable, fmt.Errorf("reading answer: %w", err))
	}
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
