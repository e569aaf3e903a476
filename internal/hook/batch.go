package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"relay/internal/secret"
	"relay/internal/tiers"
	"relay/internal/tracing"
)

// The batch protocol (RELAY_HOOK_BATCH): one POST carries the records of
// several calls made at once, and the answer has one result per record, in
// the same order:
//
//	request:  {"records": [<request of one record>, ...]}
//	          Relay-Hook-Batch: <number of records>
//	answer:   200 {"results": [{"messageId": "...", "status": 204}, ...]}
//
// A result's status means what the status of a call for the record alone
// means, with the same fields: "record" with 200, "code" with 422, and
// "retryAfter" (seconds) with 429. A record's messageId is its
// idempotency key; it carries its trace context as "traceparent" and
// "tracestate". What goes wrong with the batch as a whole is never the
// records' fault (a hook that does not speak the batch protocol must not
// get records quarantined): an answer other than 200 counts for every
// record as the hook unavailable, 429 as rate limited; an answer relay
// cannot read, or with the wrong number of results, as the hook
// unavailable. A result relay cannot read, or whose messageId is not its
// record's, counts as an unexpected answer for that record.

// BatchHeader names the number of records in a batch request.
const BatchHeader = "Relay-Hook-Batch"

// maxBatchBody bounds what relay reads of a batch answer.
const maxBatchBody = 64 << 20

// Batcher sends the calls made at once in batches of at most max records,
// with at most senders requests in flight. It is safe for concurrent use
// and keeps no goroutine while no call waits.
type Batcher struct {
	c       *Client
	max     int
	senders int

	mu      sync.Mutex
	waiting []*pending
	sending int
}

// pending is one call waiting for its result.
type pending struct {
	req  *Request
	done chan result // buffered: a sender never waits for its caller
}

type result struct {
	rec map[string]any
	err error
}

// NewBatcher batches c's calls: max records per request; concurrency is
// the most calls made at once, so that many records fill the requests
// in flight.
func NewBatcher(c *Client, maxRecords, concurrency int) *Batcher {
	maxRecords = max(maxRecords, 1)
	return &Batcher{c: c, max: maxRecords, senders: max((concurrency+maxRecords-1)/maxRecords, 1)}
}

// Call sends req in the next batch and returns its result, as Client.Call
// does for a record alone.
func (b *Batcher) Call(ctx context.Context, req *Request) (map[string]any, error) {
	r := *req
	if tc := tracing.ContextOf(trace.SpanContextFromContext(ctx)); tc.Parent != nil {
		r.TraceParent, r.TraceState = string(tc.Parent), string(tc.State)
	}
	p := &pending{req: &r, done: make(chan result, 1)}
	b.mu.Lock()
	b.waiting = append(b.waiting, p)
	if b.sending < b.senders {
		b.sending++
		go b.send()
	}
	b.mu.Unlock()
	select {
	case res := <-p.done:
		return res.rec, res.err
	case <-ctx.Done():
		// The record stays where it is, and its next call carries the
		// same idempotency key. Not sent yet, it is not sent at all:
		// a late copy could reach the hook after that next call.
		b.withdraw(p)
		return nil, tiers.Fail(tiers.CauseHookUnavailable, ctx.Err())
	}
}

// withdraw takes p out of the calls waiting for a request, if it is
// still there.
func (b *Batcher) withdraw(p *pending) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, q := range b.waiting {
		if q == p {
			b.waiting = append(b.waiting[:i:i], b.waiting[i+1:]...)
			return
		}
	}
}

// send sends what waits, a batch at a time, until nothing waits.
func (b *Batcher) send() {
	for {
		b.mu.Lock()
		n := min(len(b.waiting), b.max)
		if n == 0 {
			b.sending--
			b.waiting = nil
			b.mu.Unlock()
			return
		}
		batch := make([]*pending, n)
		copy(batch, b.waiting)
		b.waiting = b.waiting[n:]
		b.mu.Unlock()
		results := b.c.callBatch(batch)
		for i, p := range batch {
			p.done <- results[i]
		}
	}
}

// callBatch makes one batch request for the records of batch and gives
// each its result.
func (c *Client) callBatch(batch []*pending) []result {
	results := make([]result, len(batch))
	var sent []int // indexes of the records in the request
	var body bytes.Buffer
	body.WriteString(`{"records":[`)
	for i, p := range batch {
		one, err := json.Marshal(p.req)
		if err != nil {
			results[i].err = tiers.Failf(tiers.CauseHookInvalidInput, "record cannot be sent as JSON: %v", err)
			continue
		}
		if len(sent) > 0 {
			body.WriteByte(',')
		}
		body.Write(one)
		sent = append(sent, i)
	}
	body.WriteString(`]}`)
	if len(sent) == 0 {
		return results
	}
	answers, err := c.postBatch(body.Bytes(), len(sent))
	for k, i := range sent {
		switch {
		case err != nil:
			results[i].err = err
		default:
			results[i].rec, results[i].err = answers[k].decide(batch[i].req.MessageID)
		}
	}
	return results
}

// batchResult is one record's result in a batch answer; raw is the whole
// entry, read by decide as the body of a call for the record alone.
type batchResult struct {
	MessageID  string  `json:"messageId"`
	Status     int     `json:"status"`
	RetryAfter float64 `json:"retryAfter"`
	raw        json.RawMessage
}

func (r *batchResult) decide(id string) (map[string]any, error) {
	switch {
	case r.Status == 0:
		return nil, tiers.Failf(tiers.CauseHookUnexpected, "batch result without a status: %.200s", r.raw)
	case r.MessageID != "" && r.MessageID != id:
		return nil, tiers.Failf(tiers.CauseHookUnexpected, "batch answer gives the result of %s in the place of %s", r.MessageID, id)
	}
	retry := ""
	if r.RetryAfter > 0 {
		retry = strconv.Itoa(int(math.Ceil(r.RetryAfter)))
	}
	return decide(r.Status, r.raw, retry)
}

// postBatch sends one batch request of n records and reads its answer:
// n results, or the error every record of the batch gets.
func (c *Client) postBatch(body []byte, n int) ([]batchResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("hook request: %w", err)
	}
	c.prepare(hr, body)
	hr.Header.Set(BatchHeader, strconv.Itoa(n))
	// Not through the traced transport: the batch belongs to no one
	// record's trace; each record carries its own context in the body.
	done := c.observe()
	resp, err := c.plain.Do(hr)
	if err != nil {
		done(0, err)
		return nil, c.failed(err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, min(maxBody*int64(max(n, 1)), maxBatchBody)))
	done(resp.StatusCode, err)
	if err != nil {
		if c.timedOut != nil && timeout(err) {
			c.timedOut()
		}
		return nil, tiers.Fail(tiers.CauseHookUnavailable, fmt.Errorf("reading answer: %w", err))
	}
	c.heard(resp.StatusCode)
	switch st := resp.StatusCode; {
	case st == http.StatusTooManyRequests:
		return nil, &tiers.Error{Cause: tiers.CauseHookRateLimited, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now()),
			Err: errors.New("hook answered 429 to a batch")}
	case secret.RefusedStatus(st):
		return nil, tiers.Failf(tiers.CauseHookUnauthorized, "hook answered %d to a batch of %d records: it refuses relay's credential", st, n)
	case st != http.StatusOK:
		return nil, tiers.Failf(tiers.CauseHookUnavailable, "hook answered %d to a batch of %d records", st, n)
	}
	var out struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(answer, &out); err != nil {
		return nil, tiers.Failf(tiers.CauseHookUnavailable, "batch answer is not JSON: %v", err)
	}
	if len(out.Results) != n {
		return nil, tiers.Failf(tiers.CauseHookUnavailable, "batch answer has %d results for %d records", len(out.Results), n)
	}
	results := make([]batchResult, n)
	for i, raw := range out.Results {
		if err := json.Unmarshal(raw, &results[i]); err != nil {
			results[i] = batchResult{}
		}
		results[i].raw = raw
	}
	return results, nil
}
