package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"relay/internal/ledger"
)

// The console's browser tests drive Debian's Chromium (chromedp) against
// `relay console` over a quarantine a real relay made, with the real
// broker and registry. axe-core (RELAY_AXE_JS, scripts/tools/axe.sh) checks
// each page for serious or critical accessibility violations.

// browser starts headless Chromium; it skips the test when Chromium or
// axe-core is missing, unless the run requires them (make test).
func browser(t *testing.T) (context.Context, string) {
	t.Helper()
	exe := envOr("RELAY_CHROMIUM", "/usr/bin/chromium")
	axe := os.Getenv("RELAY_AXE_JS")
	if _, err := os.Stat(exe); err != nil || axe == "" {
		if os.Getenv("RELAY_TEST_REQUIRE_BROWSER") == "1" {
			t.Fatalf("the browser tests need Chromium (%s: %v) and RELAY_AXE_JS (%q): scripts/install.sh and scripts/tools/axe.sh install them", exe, err, axe)
		}
		t.Skip("no Chromium or axe-core (RELAY_CHROMIUM, RELAY_AXE_JS)")
	}
	src, err := os.ReadFile(axe)
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return ctx, string(src)
}

// run runs browser actions with a bound, failing the test with what.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	get(t, ctx, what, chromedp.Steps(actions...))
}

// get runs one browser action with a bound, and returns its value.
func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, a)
	if err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		t.Fatalf("%s: %v\npage: %s", what, err, tail(body, 30))
	}
	return v
}

// textOf is the text of the first element sel matches, "" if none.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return get(t, ctx, "reading "+sel, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q)||{textContent:""}).textContent.trim()`, sel)))
}

// waitText waits until sel's text contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := textOf(t, ctx, sel)
		if strings.Contains(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q after %s, want %q\npage: %s", sel, got, d, want, tail(textOf(t, ctx, "body"), 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// accessible runs axe-core on the page: no serious or critical violation.
func accessible(t *testing.T, ctx context.Context, axe, page string) {
	t.Helper()
	get(t, ctx, "axe into "+page, chromedp.Evaluate[bool](axe+";true"))
	found := get(t, ctx, "axe on "+page, chromedp.Evaluate[[]string](`axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}})
  .then(r => r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
  .map(v => v.impact + " " + v.id + ": " + v.help + " — " + v.nodes.map(n => n.target.join(" ")).slice(0, 3).join(", ")))`, chromedp.EvalAwaitPromise))
	for _, v := range found {
		t.Errorf("accessibility, %s: %s", page, v)
	}
}

// screenshot saves the page as name.png in RELAY_TEST_SCREENSHOTS, if set
// (the README's pictures are taken so).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("RELAY_TEST_SCREENSHOTS")
	if dir == "" {
		return
	}
	png := get(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil { //nolint:gosec // a picture for the docs
		t.Fatal(err)
	}
}

// TestConsoleInABrowser drives the console through an operator's morning:
// the overview's counts per code, a filter that narrows the list and
// survives a reload, a failure's decoded payload with no secret on the
// page, actions refused without sign-in and from another site, a dry run
// that predicts, a sample replay that resolves what the fix lets through
// (the ledger records the actor and reason), and a replay stopped by a
// stop condition (relay not consuming: the replay topic's lag rises),
// which the page explains. Every page passes axe-core.
func TestConsoleInABrowser(t *testing.T) {
	ctx, axe := browser(t)
	const v1n = 20
	f := newQuarantineFixture(t, v1n, 3, 2, 0)
	l := ledgerOf(t, f.s)
	codeOf := func(id string) string { return l[id].Code }
	v1Code, garbageCode, truncCode := codeOf(f.v1[0]), codeOf(f.garbage[0]), codeOf(f.trunc[0])

	token := "console-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-secret"
	addr := freeAddr(t)
	base := "http://" + addr
	env := f.s.env("", append(f.fixed(), "RELAY_CONSOLE_ADDR", addr, "RELAY_CONSOLE_TOKEN", token, "RELAY_CONSOLE_READ_AUTH", "signed-in",
		"RELAY_QUARANTINE_OWNER", "payments-team", "RELAY_QUARANTINE_ALERT_THRESHOLD", "10", "RELAY_LOG_FORMAT", "text")...)
	delete(env, "RELAY_TRANSACTIONAL_ID")
	con := startRelayCmd(t, "console", exec.Command(relayBin, "console"), env)
	con.waitLog("relay console listening", 60*time.Second)

	// Reading needs a signed-in operator (RELAY_CONSOLE_READ_AUTH): the
	// overview and a failure's page show the sign-in form, and nothing of
	// the quarantine.
	for _, page := range []string{"/", "/failure?id=" + url.QueryEscape(f.v1[0])} {
		run(t, ctx, "read without sign-in", chromedp.Navigate(base+page), chromedp.WaitVisible(chromedp.CSS("#login")))
		if html := get(t, ctx, "page source", chromedp.OuterHTML(chromedp.CSS("html"))); strings.Contains(html, f.s.src.topic) || strings.Contains(html, f.v1[0]) {
			t.Errorf("%s without sign-in shows the quarantine", page)
		}
	}
	// An action without signing in is refused, and nothing is written.
	status := get(t, ctx, "unauthenticated discard", chromedp.Evaluate[int](fmt.Sprintf(`fetch("/discard", {method: "POST", body: new URLSearchParams({ids: %q, reason: "no sign-in"})}).then(r => r.status)`,
		f.v1[0]), chromedp.EvalAwaitPromise))
	if status != http.StatusUnauthorized {
		t.Errorf("discard without sign-in: status %d, want 401", status)
	}

	// Sign in.
	run(t, ctx, "sign in", chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.CSS("#login")))
	accessible(t, ctx, axe, "sign-in")
	run(t, ctx, "sign in", chromedp.SetValue(chromedp.CSS("#name"), "alice"), chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.Submit(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#actor")))

	// Overview: counts by code, owner, threshold passed.
	run(t, ctx, "overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#src-"+f.s.src.topic)))
	src := "#src-" + f.s.src.topic
	for code, want := range map[string]int{v1Code: v1n, garbageCode: 3, truncCode: 2} {
		if got := textOf(t, ctx, fmt.Sprintf(`%s tr[data-code=%q] td.total`, src, code)); got != strconv.Itoa(want) {
			t.Errorf("overview: %s total %q, want %d", code, got, want)
		}
		if got := textOf(t, ctx, fmt.Sprintf(`%s tr[data-code=%q] td.open`, src, code)); got != strconv.Itoa(want) {
			t.Errorf("overview: %s open %q, want %d", code, got, want)
		}
	}
	if got := textOf(t, ctx, src+" .owner"); got != "payments-team" {
		t.Errorf("owner %q", got)
	}
	if got := textOf(t, ctx, src+" .threshold"); !strings.Contains(got, "over") {
		t.Errorf("25 unresolved over a threshold of 10, but the page says %q", got)
	}
	accessible(t, ctx, axe, "overview")

	// Filter by code: narrows, is in the URL, survives a reload.
	run(t, ctx, "filter", chromedp.Navigate(base+"/failures"), chromedp.WaitVisible(chromedp.CSS("#count")),
		chromedp.SetValue(chromedp.CSS("#f-code"), v1Code), chromedp.Submit(chromedp.CSS("#filters")))
	waitText(t, ctx, "#count strong", strconv.Itoa(v1n), 10*time.Second)
	loc := get(t, ctx, "location", chromedp.Location())
	run(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#count")))
	if u, _ := url.Parse(loc); u.Query().Get("code") != v1Code {
		t.Errorf("the filter is not in the URL: %s", loc)
	}
	if got := textOf(t, ctx, "#count strong"); got != strconv.Itoa(v1n) {
		t.Errorf("after a reload %s failures match, want %d", got, v1n)
	}
	accessible(t, ctx, axe, "list")

	// A forged cross-site request, from a page of another site, with the
	// session cookie the browser holds: refused.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/discard"><input name="ids" value="%s"><input name="reason" value="forged"></form>
<script>document.getElementById("f").submit()</script>`, base, f.v1[1])
	}))
	defer evil.Close()
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	run(t, ctx, "forged request", chromedp.Navigate(evilURL))
	waitText(t, ctx, "body", "refused", 10*time.Second)

	// A failure: the decoded payload, every header, no secret on the page.
	id := f.v1[0]
	run(t, ctx, "detail", chromedp.Navigate(base+"/failure?id="+url.QueryEscape(id)), chromedp.WaitVisible(chromedp.CSS("#envelope")))
	if got := textOf(t, ctx, "#payload"); !strings.Contains(got, `"id": "v1-`) {
		t.Errorf("payload not decoded through the registry: %q", got)
	}
	if got := textOf(t, ctx, "#headers"); !strings.Contains(got, "relay.error.code") || !strings.Contains(got, "relay.failure.id") {
		t.Errorf("headers: %q", got)
	}
	html := get(t, ctx, "page source", chromedp.OuterHTML(chromedp.CSS("html")))
	if strings.Contains(html, token) {
		t.Error("the console token is on a page")
	}
	accessible(t, ctx, axe, "failure")

	// Discard through the pages: one garbage failure from its page, two
	// ticked on the list; the ledger records who and why.
	run(t, ctx, "discard one", chromedp.Navigate(base+"/failure?id="+url.QueryEscape(f.garbage[0])), chromedp.WaitVisible(chromedp.CSS("#discard-one")),
		chromedp.SetValue(chromedp.CSS("#discard-one #reason"), "test garbage from the load generator"), chromedp.Submit(chromedp.CSS("#discard-one")))
	waitText(t, ctx, "#flash", "Discarded 1", 30*time.Second)
	run(t, ctx, "discard chosen", chromedp.Navigate(base+"/failures?code="+garbageCode), chromedp.WaitVisible(chromedp.CSS("#selection")),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`input[name="ids"][value=%q]`, f.garbage[1]))),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`input[name="ids"][value=%q]`, f.garbage[2]))),
		chromedp.SetValue(chromedp.CSS("#selection #reason"), "the rest of the garbage"), chromedp.Click(chromedp.CSS("#discard")))
	waitText(t, ctx, "#flash", "Discarded 2", 30*time.Second)
	l = ledgerOf(t, f.s)
	for i, why := range []string{"test garbage from the load generator", "the rest of the garbage", "the rest of the garbage"} {
		e := l[f.garbage[i]]
		if h := e.Current(); e.State != ledger.Discarded || h.Actor != "alice (console, token)" || h.Reason != why {
			t.Errorf("%s: %s by %q for %q, want discarded by alice (console, token) for %q", f.garbage[i], e.State, h.Actor, h.Reason, why)
		}
	}

	// Dry run over the source: the fixed admission passes v1, the rest
	// would fail again, by code.
	run(t, ctx, "dry run", chromedp.Navigate(base+"/replay?source="+f.s.src.topic), chromedp.WaitVisible(chromedp.CSS("#replay-form")),
		chromedp.SetValue(chromedp.CSS("#reason"), "what would pass?"), chromedp.Click(chromedp.CSS("#dry-run")),
		chromedp.WaitVisible(chromedp.CSS("#prediction")))
	if got := textOf(t, ctx, "#p-pass"); got != strconv.Itoa(v1n) {
		t.Errorf("dry run: would pass %s, want %d", got, v1n)
	}
	for code, n := range map[string]int{truncCode: 2} { // the garbage is discarded by now
		if got := textOf(t, ctx, fmt.Sprintf(`#prediction tr.would-fail[data-code=%q] td:last-child`, code)); got != strconv.Itoa(n) {
			t.Errorf("dry run: %s would fail again %q, want %d", code, got, n)
		}
	}
	accessible(t, ctx, axe, "replay form")

	// The ledger so far: nothing discarded, by the forged request or
	// without sign-in.
	for _, x := range []string{f.v1[0], f.v1[1]} {
		if st := ledgerOf(t, f.s)[x].State; st != ledger.Open {
			t.Errorf("%s is %s after refused actions, want open", x, st)
		}
	}

	// A sample of 2 with the fix deployed: resolved, with the actor and
	// reason in the ledger.
	r := f.startFixed(t)
	// From the filtered list, through its link: the replay form keeps
	// the filter.
	run(t, ctx, "replay link", chromedp.Navigate(base+"/failures?code="+v1Code), chromedp.WaitVisible(chromedp.CSS("#replay-selection")),
		chromedp.Click(chromedp.CSS("#replay-selection")), chromedp.WaitVisible(chromedp.CSS("#replay-form")))
	if got := textOf(t, ctx, "#matching"); !strings.Contains(got, "code="+v1Code) || !strings.Contains(got, strconv.Itoa(v1n)+" of them are open") {
		t.Errorf("the replay form from the list's link: %q", got)
	}
	run(t, ctx, "sample replay", chromedp.WaitVisible(chromedp.CSS("#replay-form")),
		chromedp.SetValue(chromedp.CSS("#reason"), "fix: v1 accepted"), chromedp.SetValue(chromedp.CSS("#sample"), "2"),
		chromedp.Click(chromedp.CSS(`input[name="sample-only"]`)), chromedp.Click(chromedp.CSS("#start")),
		chromedp.WaitVisible(chromedp.CSS("#run")))
	if got := textOf(t, ctx, "#watching"); !strings.Contains(got, "lag on the replay topic above 1000") {
		t.Errorf("the replay page does not say what stops it: %q", got)
	}
	waitText(t, ctx, "#status", "done", 120*time.Second)
	if got := textOf(t, ctx, "#resolved"); got != "2" {
		t.Errorf("sample: %s resolved, want 2", got)
	}
	accessible(t, ctx, axe, "replay page")
	resolved := 0
	for _, x := range f.v1 {
		e := ledgerOf(t, f.s)[x]
		if e.State != ledger.Resolved {
			continue
		}
		resolved++
		if h := e.History[1]; h.State != ledger.Replaying || h.Actor != "alice (console, token)" || h.Reason != "fix: v1 accepted" {
			t.Errorf("%s: replaying by %q for %q, want alice (console, token), the reason", x, h.Actor, h.Reason)
		}
	}
	if resolved != 2 {
		t.Errorf("%d v1 failures resolved in the ledger, want the sample's 2", resolved)
	}
	run(t, ctx, "overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(src)))
	screenshot(t, ctx, "console-overview")

	// relay stops consuming; the rest is replayed slowly, the replay
	// topic's lag rises, and the replay stops by itself, saying why.
	r.stop()
	run(t, ctx, "lagging replay", chromedp.Navigate(base+"/replay?code="+v1Code), chromedp.WaitVisible(chromedp.CSS("#replay-form")),
		chromedp.SetValue(chromedp.CSS("#reason"), "the rest"), chromedp.SetValue(chromedp.CSS("#rate"), "2"),
		chromedp.SetValue(chromedp.CSS("#max-replay-lag"), "3"), chromedp.Click(chromedp.CSS("#start")),
		chromedp.WaitVisible(chromedp.CSS("#run")))
	waitText(t, ctx, "#phase", "running", 30*time.Second)
	time.Sleep(2 * time.Second)
	screenshot(t, ctx, "console-replay")
	waitText(t, ctx, "#status", "stopped", 60*time.Second)
	note := textOf(t, ctx, "#note")
	if !strings.Contains(note, "lag") || !strings.Contains(note, "max-replay-lag 3") {
		t.Errorf("the page does not say why the replay stopped: %q", note)
	}
	published, _ := strconv.Atoi(textOf(t, ctx, "#published"))
	replaying := 0
	for _, x := range f.v1 {
		if ledgerOf(t, f.s)[x].State == ledger.Replaying {
			replaying++
		}
	}
	if published == 0 || published >= v1n-2 || replaying != published {
		t.Errorf("stopped replay: %d published of %d, %d replaying in the ledger: want some, not all, and the same", published, v1n-2, replaying)
	}
}
