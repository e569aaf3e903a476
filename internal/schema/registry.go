package schema

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/riferrei/srclient"
)

// ErrNotFound says the registry answered that the schema id, subject or
// version does not exist.
var ErrNotFound = errors.New("not found in the schema registry")

// UnavailableError says the registry could not answer: unreachable, a 5xx,
// a timeout, or an answer relay cannot read. It may heal.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return "schema registry unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// SubjectVersion is one registration of a schema.
type SubjectVersion struct {
	Subject string
	Version int
}

// Registry is what admission asks a schema registry, by immutable id.
type Registry interface {
	// Schema returns the schema text of id.
	Schema(ctx context.Context, id int) (string, error)
	// Versions returns the subjects and versions id is registered under.
	Versions(ctx context.Context, id int) ([]SubjectVersion, error)
}

// Client talks to a Confluent-compatible registry through srclient, with
// srclient's own cache off (admission keeps a bounded one). Every call
// carries its caller's context: srclient builds requests without one, so
// the client keeps MaxCalls srclient clients ("conns"), each with a
// transport that adds the context of the one call it carries at a time.
// Up to MaxCalls calls run at once; a call waits for a free conn within
// its context. The conns share one HTTP transport that keeps up to
// MaxCalls idle connections to the registry.
type Client struct {
	idle chan *conn // the connections not carrying a call
	all  []*conn
}

// MaxCalls bounds the registry calls of one client in flight at once.
// Cold lookups are rare (once per schema id and process; admission
// shares one lookup among the records waiting for the same id), so a
// handful is enough for a burst of new ids without a storm on the
// registry.
const MaxCalls = 8

// conn is one srclient client, with the transport that carries its call's
// context. Lent to one call at a time.
type conn struct {
	rt  *ctxTransport
	src *srclient.SchemaRegistryClient
}

// NewClient builds a client for the registry at url (for Apicurio, its
// /apis/ccompat/v7 base). timeout bounds each HTTP exchange as a backstop to
// the callers' deadlines.
func NewClient(url string, timeout time.Duration) *Client {
	c := &Client{idle: make(chan *conn, MaxCalls)}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = MaxCalls
	for range MaxCalls {
		rt := &ctxTransport{base: base}
		src := srclient.NewSchemaRegistryClient(strings.TrimRight(url, "/"),
			srclient.WithClient(&http.Client{Transport: rt, Timeout: timeout}))
		src.CachingEnabled(false)
		src.CodecCreationEnabled(false)
		cn := &conn{rt: rt, src: src}
		c.all = append(c.all, cn)
		c.idle <- cn
	}
	return c
}

// SetCredentials sets basic auth (user and password) or, with an empty
// user, a bearer token. Call it before the first call.
func (c *Client) SetCredentials(user, secret string) {
	for _, cn := range c.all {
		if user == "" {
			cn.src.SetBearerToken(secret)
			continue
		}
		cn.src.SetCredentials(user, secret)
	}
}

// ctxTransport gives each request the context of the call in progress.
type ctxTransport struct {
	base http.RoundTripper
	ctx  context.Context // set by the call that owns the conn
}

func (t *ctxTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.ctx != nil {
		r = r.WithContext(t.ctx)
	}
	return t.base.RoundTrip(r)
}

// call runs f on a free connection, with ctx on its requests.
func (c *Client) call(ctx context.Context, what string, f func(src *srclient.SchemaRegistryClient) error) error {
	var cn *conn
	select {
	case cn = <-c.idle:
	case <-ctx.Done():
		return &UnavailableError{fmt.Errorf("%s: %w", what, ctx.Err())}
	}
	defer func() { c.idle <- cn }()
	if err := ctx.Err(); err != nil {
		return &UnavailableError{fmt.Errorf("%s: %w", what, err)}
	}
	cn.rt.ctx = ctx
	defer func() { cn.rt.ctx = nil }()
	return typed(what, f(cn.src))
}

// Schema implements Registry.
func (c *Client) Schema(ctx context.Context, id int) (string, error) {
	var s *srclient.Schema
	err := c.call(ctx, "schema "+strconv.Itoa(id), func(src *srclient.SchemaRegistryClient) (err error) {
		s, err = src.GetSchema(id)
		return err
	})
	if err != nil {
		return "", err
	}
	return s.Schema(), nil
}

// Versions implements Registry.
func (c *Client) Versions(ctx context.Context, id int) ([]SubjectVersion, error) {
	var resp srclient.SubjectVersionResponse
	err := c.call(ctx, "versions of schema "+strconv.Itoa(id), func(src *srclient.SchemaRegistryClient) (err error) {
		resp, err = src.GetSubjectVersionsById(id)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]SubjectVersion, 0, len(resp))
	for _, sv := range resp {
		out = append(out, SubjectVersion{Subject: sv.Subject, Version: sv.Version})
	}
	return out, nil
}

// ByVersion returns the id and text of a subject's version (start-up only).
func (c *Client) ByVersion(ctx context.Context, subject string, version int) (int, string, error) {
	var s *srclient.Schema
	err := c.call(ctx, fmt.Sprintf("subject %s version %d", subject, version), func(src *srclient.SchemaRegistryClient) (err error) {
		s, err = src.GetSchemaByVersion(subject, version)
		return err
	})
	if err != nil {
		return 0, "", err
	}
	return s.ID(), s.Schema(), nil
}

// SubjectVersions lists a subject's versions (start-up only).
func (c *Client) SubjectVersions(ctx context.Context, subject string) ([]int, error) {
	var vs []int
	err := c.call(ctx, "versions of subject "+subject, func(src *srclient.SchemaRegistryClient) (err error) {
		vs, err = src.GetSchemaVersions(subject)
		return err
	})
	return vs, err
}

// typed sorts an srclient error into ErrNotFound or *UnavailableError.
// srclient returns srclient.Error for JSON error bodies, and a plain error
// carrying the HTTP status line otherwise.
func typed(what string, err error) error {
	if err == nil {
		return nil
	}
	var se srclient.Error
	if errors.As(err, &se) {
		if se.Code == http.StatusNotFound || se.Code/100 == http.StatusNotFound {
			return fmt.Errorf("%s: %w (%s)", what, ErrNotFound, se.Message)
		}
		return &UnavailableError{fmt.Errorf("%s: registry error %d: %s", what, se.Code, se.Message)}
	}
	if strings.HasPrefix(err.Error(), "404 ") {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return &UnavailableError{fmt.Errorf("%s: %w", what, err)}
}
