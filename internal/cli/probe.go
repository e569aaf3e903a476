package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"relay/internal/secret"
	"time"
)

// Probe GETs each of urls (http or https, absolute) within timeout, one
// after the other, and says on stdout which answered 200 and on stderr
// which did not, and why: OK when every one answered 200, Failure when one
// did not, Usage when one is not an http(s) URL (nothing is fetched then).
// A redirect is an answer, not followed; no proxy is used; a URL's
// password and query values are masked in what it prints. It is relay's own check for
// images without a shell or curl: the chart's helm test asks each
// replica's /readyz.
func Probe(ctx context.Context, urls []string, timeout time.Duration, stdout, stderr io.Writer) int {
	if timeout <= 0 {
		fmt.Fprintf(stderr, "relay probe: --timeout %s: more than 0\n", timeout)
		return Usage
	}
	for _, u := range urls {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			fmt.Fprintf(stderr, "relay probe: %q is not an http:// or https:// URL\n", secret.MaskURL(u))
			return Usage
		}
	}
	// No proxy: the probe asks the replicas themselves, in the cluster.
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	code := OK
	for _, u := range urls {
		if err := probe(ctx, client, u); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", secret.MaskURL(u), err)
			code = Failure
			continue
		}
		fmt.Fprintf(stdout, "%s: ok\n", secret.MaskURL(u))
	}
	return code
}

func probe(ctx context.Context, client *http.Client, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err) // its URL would show the query's values
	}
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	return nil
}
