package schema

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"github.com/riferrei/srclient"

	"relay/internal/secret"
)

// ErrNotFound says the registry answered that the schema id, subject or
// version does not exist.
var ErrNotFound = errors.New("not found in the schema registry")

// UnavailableError says the registry could not answer: unreachable, a 5xx,
// a timeout, or an answer relay cannot read. It may heal.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return "schema registry unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// UnauthorizedError says the registry refused relay's credential: it
// answered 401 or 403. No record is at fault, and asking again with the
// same credential gives the same answer until someone fixes it.
type UnauthorizedError struct {
	Status int
	Err    error
}

func (e *UnauthorizedError) Error() string {
	return fmt.Sprintf("schema registry refuses relay's credential (%d %s): %v", e.Status, http.StatusText(e.Status), e.Err)
}
func (e *UnauthorizedError) Unwrap() error { return e.Err }

// TLSError says the TLS handshake with the registry failed: relay does not
// trust the registry's certificate, or the registry refused relay's (or
// its lack of one). Like a refused credential, it waits for an operator.
type TLSError struct{ Err error }

func (e *TLSError) Error() string {
	return "TLS handshake with the schema registry failed: " + e.Err.Error()
}
func (e *TLSError) Unwrap() error { return e.Err }

// AccessFunc hears, after each registry answer, whether the registry
// refused relay's credential (401/403/407, or a TLS handshake: status 0)
// or accepted it (2xx, 404); other answers say nothing about the
// credential and are not reported.
type AccessFunc func(refused bool, status int)

// SubjectVersion is one registration of a schema.
type SubjectVersion struct {
	Subject string
	Version int
}

// Registry is what admission asks a schema registry, by immutable id.
type Registry interface {
	// Schema returns the schema of id: its text, type and references.
	Schema(ctx context.Context, id int) (Text, error)
	// Versions returns the subjects and versions id is registered under.
	Versions(ctx context.Context, id int) ([]SubjectVersion, error)
	// ByVersion returns the id and schema of a subject's version: how a
	// schema's references are found.
	ByVersion(ctx context.Context, subject string, version int) (int, Text, error)
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
	idle   chan *conn // the connections not carrying a call
	all    []*conn
	base   *http.Transport
	auth   *Auth
	access AccessFunc // nil: nobody listens
	// scheme and host of the registry: the only requests that carry
	// relay's credential.
	scheme, host string
}

// Auth is how relay authenticates itself to the registry.
type Auth struct {
	// User, when not empty, sends basic auth with Password; else Password,
	// when it gives a value, is sent as a bearer token. Password is asked
	// at every request, so a rotated secret is used from the next one on.
	User     string
	Password func() string
	// Token, when set, gives the bearer token of each request instead
	// (an OAuth client credentials grant that refreshes it).
	Token func(context.Context) (string, error)
	// TLS, when set, configures the registry's connections: a private
	// CA, a client certificate.
	TLS *tls.Config
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
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = MaxCalls
	c := &Client{idle: make(chan *conn, MaxCalls), base: base}
	if u, err := neturl.Parse(url); err == nil {
		c.scheme, c.host = u.Scheme, u.Host
	}
	for range MaxCalls {
		rt := &ctxTransport{base: base, client: c}
		// A redirect is not followed: relay's credential goes to the
		// registry it was given for, and nowhere else.
		hc := &http.Client{Transport: rt, Timeout: timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		src := srclient.NewSchemaRegistryClient(strings.TrimRight(url, "/"), srclient.WithClient(hc))
		src.CachingEnabled(false)
		src.CodecCreationEnabled(false)
		cn := &conn{rt: rt, src: src}
		c.all = append(c.all, cn)
		c.idle <- cn
	}
	return c
}

// Authenticate sets how relay authenticates itself. Call it before the
// first call.
func (c *Client) Authenticate(a Auth) {
	c.auth = &a
	if a.TLS != nil {
		c.base.TLSClientConfig = a.TLS
	}
}

// OnAccess sets who hears whether the registry accepts relay's
// credential. Call it before the first call.
func (c *Client) OnAccess(f AccessFunc) { c.access = f }

// ctxTransport gives each request the context of the call in progress,
// and remembers the status of its last answer: srclient keeps only the
// body of an error, and a 401 from a proxy may have a JSON body without
// an error code.
type ctxTransport struct {
	base   http.RoundTripper
	client *Client
	ctx    context.Context // set by the call that owns the conn
	status int             // of the last answer of the call; 0: none
}

func (t *ctxTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.ctx != nil {
		r = r.WithContext(t.ctx)
	}
	if a := t.client.auth; a != nil && a.Token != nil && r.URL.Scheme == t.client.scheme && r.URL.Host == t.client.host {
		tok, err := a.Token(r.Context())
		if err != nil {
			return nil, err
		}
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok)
	} else if a != nil && r.URL.Scheme == t.client.scheme && r.URL.Host == t.client.host {
		secret := ""
		if a.Password != nil {
			secret = a.Password()
		}
		switch {
		case a.User != "":
			r = r.Clone(r.Context()) // RoundTrip must not change the request it was given
			r.SetBasicAuth(a.User, secret)
		case secret != "":
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+secret)
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err == nil {
		t.status = resp.StatusCode
	}
	return resp, err
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
	cn.rt.ctx, cn.rt.status = ctx, 0
	defer func() { cn.rt.ctx = nil }()
	err := f(cn.src)
	st := cn.rt.status
	if c.access != nil && (secret.RefusedStatus(st) || st/100 == 2 || st == http.StatusNotFound) {
		c.access(secret.RefusedStatus(st), st)
	}
	var te *secret.TokenError
	if err != nil && st == 0 && errors.As(err, &te) && (te.Status == http.StatusBadRequest || secret.RefusedStatus(te.Status)) {
		// The token endpoint refuses relay's client credentials (RFC
		// 6749 answers invalid_client with 400 or 401). Its 5xx, 408 or
		// 429 is an outage, as the registry's would be.
		if c.access != nil {
			c.access(true, te.Status)
		}
		return &UnauthorizedError{Status: te.Status, Err: fmt.Errorf("%s: %w", what, err)}
	}
	if err != nil && secret.RefusedStatus(st) {
		return &UnauthorizedError{Status: st, Err: fmt.Errorf("%s: %w", what, err)}
	}
	if err != nil && st == 0 && secret.TLSRefused(err) {
		if c.access != nil {
			c.access(true, 0)
		}
		return &TLSError{fmt.Errorf("%s: %w", what, err)}
	}
	return typed(what, err)
}

// Schema implements Registry.
func (c *Client) Schema(ctx context.Context, id int) (Text, error) {
	var s *srclient.Schema
	err := c.call(ctx, "schema "+strconv.Itoa(id), func(src *srclient.SchemaRegistryClient) (err error) {
		s, err = src.GetSchema(id)
		return err
	})
	if err != nil {
		return Text{}, err
	}
	return textOf(s), nil
}

// textOf is srclient's schema as a Text. The registry omits the type of
// an Avro schema.
func textOf(s *srclient.Schema) Text {
	t := Text{Schema: s.Schema(), Format: FormatAvro}
	if st := s.SchemaType(); st != nil && *st != "" {
		t.Format = Format(strings.ToUpper(string(*st)))
	}
	for _, r := range s.References() {
		t.References = append(t.References, Reference{Name: r.Name, Subject: r.Subject, Version: r.Version})
	}
	return t
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

// ByVersion implements Registry: the id and schema of a subject's
// version (at start-up, and for a new schema's references).
func (c *Client) ByVersion(ctx context.Context, subject string, version int) (int, Text, error) {
	var s *srclient.Schema
	err := c.call(ctx, fmt.Sprintf("subject %s version %d", subject, version), func(src *srclient.SchemaRegistryClient) (err error) {
		s, err = src.GetSchemaByVersion(subject, version)
		return err
	})
	if err != nil {
		return 0, Text{}, err
	}
	return s.ID(), textOf(s), nil
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
