// Command tracepic takes a PNG screenshot of one trace in Jaeger's UI with
// headless Chromium: it opens the trace view, waits for the span rows,
// opens the details and the attribute table of the last span whose
// operation name contains -expand, makes the picture as tall as the
// rows then are, and writes it. scripts/trace-picture.sh runs it.
//
// usage: tracepic -url URL -out FILE [-chromium PATH] [-width N] [-expand TEXT]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/chromedp/chromedp"
)

// maxHeight is the window's height while the page lays out: Jaeger's span
// list draws only the rows in view, so it starts taller than any picture.
const maxHeight = 3000

type options struct {
	url, out, chromium, expand string
	width                      int
	timeout                    time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "", "the trace view's URL")
	flag.StringVar(&o.out, "out", "", "the PNG file to write")
	flag.StringVar(&o.chromium, "chromium", "chromium", "the Chromium binary")
	flag.IntVar(&o.width, "width", 1400, "the picture's width in CSS pixels")
	flag.StringVar(&o.expand, "expand", "", "open the last span whose operation name contains this")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Second, "how long the page may take")
	flag.Parse()
	if o.url == "" || o.out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "tracepic:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	browser, stop, err := startBrowser(o.chromium, o.width)
	if err != nil {
		return err
	}
	defer stop()
	ctx, cancelTimeout := context.WithTimeout(browser, o.timeout)
	defer cancelTimeout()
	err = chromedp.Do(ctx,
		chromedp.EmulateViewport(int64(o.width), maxHeight),
		chromedp.Navigate(o.url),
		chromedp.WaitVisible(chromedp.CSS(".span-name")),
		expandSpan(o.expand),
		// Let the opened details lay out and the fonts settle.
		chromedp.Sleep(500*time.Millisecond),
	)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no trace view at %s within %v (does the page show span rows?)", o.url, o.timeout)
	}
	if err != nil {
		return err
	}
	png, err := chromedp.Run(ctx, fitAndCapture(o.width))
	if err != nil {
		return err
	}
	return os.WriteFile(o.out, png, 0o644)
}

// startBrowser starts chromium headless, with a fresh profile that stop
// removes. The network here is closed: everything that would reach out on
// its own (updates, sync, QUIC probes, first-run pages) is off.
func startBrowser(chromium string, width int) (ctx context.Context, stop func(), err error) {
	profile, err := os.MkdirTemp("", "tracepic-chromium-")
	if err != nil {
		return nil, nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(width, maxHeight),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	stop = func() {
		cancel()
		cancelAlloc()
		_ = os.RemoveAll(profile)
	}
	// The first run starts the browser; a deadline on it would stop the
	// browser too, so only the steps after it have one.
	if err := chromedp.Do(ctx); err != nil {
		stop()
		return nil, nil, fmt.Errorf("starting %s: %w", chromium, err)
	}
	return ctx, stop, nil
}

// fitAndCapture makes the window as tall as the page's last span row
// reaches, plus a margin, and takes the screenshot.
func fitAndCapture(width int) chromedp.Action[[]byte] {
	return func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
		bottom, err := chromedp.Evaluate[float64](`Math.max(0, ...Array.from(
			document.querySelectorAll('.VirtualizedTraceView--row'), e => e.getBoundingClientRect().bottom))`)(ctx, t)
		if err != nil {
			return nil, err
		}
		height := min(int64(bottom)+16, maxHeight)
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), height), chromedp.Sleep(300*time.Millisecond)); err != nil {
			return nil, err
		}
		return chromedp.CaptureScreenshot()(ctx, t)
	}
}

// expandSpan clicks the name of the last span row whose operation
// contains text, which opens that span's details (attributes, process,
// events, references) under the row, then the header of their attribute
// list, which shows it as a table. An empty text opens nothing.
func expandSpan(text string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if text == "" {
			return nil
		}
		arg, err := json.Marshal(text)
		if err != nil {
			return err
		}
		found, err := chromedp.Evaluate[bool](`(() => {
			const row = Array.from(document.querySelectorAll('.span-name')).findLast(
				e => (e.querySelector('.endpoint-name')?.textContent ?? '').includes(`+string(arg)+`));
			if (!row) return false;
			row.click();
			return true;
		})()`)(ctx, t)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("no span whose operation contains %q", text)
		}
		return chromedp.Do(ctx,
			chromedp.WaitVisible(chromedp.CSS(".detail-row .AccordianKeyValues--header")),
			chromedp.Click(chromedp.CSS(".detail-row .AccordianKeyValues--header")),
		)
	})
}
