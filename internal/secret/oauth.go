package secret

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// ClientCredentials gets OAuth 2.0 access tokens by the client credentials
// grant (RFC 6749, 4.4), through golang.org/x/oauth2, and keeps the
// current one until shortly before it expires. The client authenticates
// with HTTP Basic (RFC 6749, 2.3.1, its id and secret form-encoded), and
// in the request body when the endpoint refuses that. The client secret
// is read at each request for a token, so a rotated secret file is used
// from the next one on.
type ClientCredentials struct {
	TokenURL string
	ClientID string
	Secret   *Value
	Scope    string
	// HTTP carries the requests to the token endpoint (the registry's CA
	// and client certificate); nil: a client with a 10 s timeout.
	HTTP *http.Client

	mu     sync.Mutex
	token  string
	expiry time.Time
	// cfg is kept: x/oauth2 remembers in it which way of authenticating
	// the endpoint took (the header or the body).
	cfg *clientcredentials.Config
}

// TokenError is the token endpoint's refusal: it answered Status, and,
// per RFC 6749 5.2, an error code and perhaps a description (its body is
// not echoed: a misconfigured endpoint may put anything there).
type TokenError struct {
	Status      int
	Code        string
	Description string
}

func (e *TokenError) Error() string {
	msg := fmt.Sprintf("the token endpoint answered %d %s", e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		msg += ": " + excerpt(e.Code)
	}
	if e.Description != "" {
		msg += " (" + excerpt(e.Description) + ")"
	}
	return msg
}

// excerpt bounds what an endpoint said to one short line.
func excerpt(s string) string {
	const most = 120
	out := []rune{}
	for _, r := range s {
		if len(out) == most {
			return string(out) + "…"
		}
		if r < 0x20 || r == 0x7f {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}

// refreshBefore is how long before its expiry a token is replaced: it must
// not expire in flight.
const refreshBefore = 30 * time.Second

// Token is a valid access token, fetched when there is none, or when the
// one held expires within refreshBefore (or a fifth of its life). A token
// without expires_in is asked for again after five minutes.
func (c *ClientCredentials) Token(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" && time.Now().Before(c.expiry) {
		return c.token, nil
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	if c.cfg == nil {
		c.cfg = &clientcredentials.Config{ClientID: c.ClientID, TokenURL: c.TokenURL, AuthStyle: oauth2.AuthStyleAutoDetect}
		if c.Scope != "" {
			c.cfg.Scopes = []string{c.Scope}
		}
	}
	c.cfg.ClientSecret = c.Secret.Get()
	started := time.Now()
	tok, err := c.cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, hc))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil {
			return "", &TokenError{Status: re.Response.StatusCode, Code: re.ErrorCode, Description: re.ErrorDescription}
		}
		return "", fmt.Errorf("token endpoint %s: %w", MaskURL(c.TokenURL), unwrapped(err))
	}
	if tok.AccessToken == "" {
		return "", fmt.Errorf("token endpoint %s: an answer without access_token", MaskURL(c.TokenURL))
	}
	life := 5 * time.Minute
	if !tok.Expiry.IsZero() {
		life = tok.Expiry.Sub(started)
	}
	c.token = tok.AccessToken
	c.expiry = started.Add(life - min(refreshBefore, life/5))
	return c.token, nil
}

// unwrapped is err without x/oauth2's "oauth2: cannot fetch token:"
// wording around a transport error, which names the URL already.
func unwrapped(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}
