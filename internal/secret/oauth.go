package secret

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// ClientCredentials gets OAuth 2.0 access tokens by the client credentials
// grant (RFC 6749, 4.4) and keeps the current one until shortly before it
// expires. The client secret is read at each request for a token, so a
// rotated secret file is used from the next one on.
type ClientCredentials struct {
	TokenURL string
	ClientID string
	Secret   *Value
	Scope    string
	HTTP     *http.Client // nil: a client with a 10 s timeout

	mu     sync.Mutex
	token  string
	expiry time.Time
}

// TokenError is the token endpoint's refusal: it answered Status.
type TokenError struct {
	Status int
	Body   string
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("the token endpoint answered %d %s: %.200s", e.Status, http.StatusText(e.Status), e.Body)
}

// refreshBefore is how long before its expiry a token is replaced: it must
// not expire in flight.
const refreshBefore = 30 * time.Second

// Token is a valid access token, fetched when there is none, or when the
// one held expires within refreshBefore (or a fifth of its life).
func (c *ClientCredentials) Token(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" && time.Now().Before(c.expiry) {
		return c.token, nil
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if c.Scope != "" {
		form.Set("scope", c.Scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(c.ClientID, c.Secret.Get())
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("token endpoint %s: %w", MaskURL(c.TokenURL), err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("token endpoint %s: %w", MaskURL(c.TokenURL), err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", &TokenError{Status: resp.StatusCode, Body: string(body)}
	}
	var out struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.AccessToken == "" {
		return "", fmt.Errorf("token endpoint %s: an answer without access_token", MaskURL(c.TokenURL))
	}
	life := time.Duration(out.ExpiresIn) * time.Second
	if life <= 0 {
		life = 5 * time.Minute // no expires_in: ask again soon enough
	}
	c.token = out.AccessToken
	c.expiry = time.Now().Add(life - min(refreshBefore, life/5))
	return c.token, nil
}
