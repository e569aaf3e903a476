package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"relay/internal/config"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// consoleMemory measures `relay console` over a quarantine of n records
// that relay itself quarantined (values that are not in the registry's
// wire format): its resident memory idle, at its peak after the pages an
// operator opens (the overview, the first and the last page of the list,
// a filter, one failure), and each page's time; against, in the same run,
// `relay quarantine stats` reading the same quarantine (peak RSS from the
// child's rusage). Nothing is asserted: the figures are printed.
func (b *bench) consoleMemory(ctx context.Context, n int) error {
	a, err := b.setupAdmission()
	if err != nil {
		return err
	}
	src := "relay-bench-console-" + b.runID
	group := src + "-grp"
	if err := b.createTopics(ctx, src); err != nil {
		return err
	}
	env := append([]string{"PATH=" + os.Getenv("PATH"), "RELAY_KAFKA_BOOTSTRAP_SERVERS=" + b.o.bootstrap, "RELAY_SOURCE_TOPICS=" + src,
		"RELAY_GROUP_ID=" + group, "RELAY_LOG_LEVEL=warn"}, a.env(b.o.registry)...)
	if err := b.applyTopics(env); err != nil {
		return err
	}
	b.groups = append(b.groups, group, group+".cli")
	fmt.Printf("== console: %d quarantined records (WIRE_FORMAT_INVALID, %d-byte values), %d partitions\n", n, b.o.size, b.o.partitions)
	pr, err := b.newProducer(nil)
	if err != nil {
		return err
	}
	for i := range n {
		if i%4096 == 0 && ctx.Err() != nil {
			break
		}
		if err := pr.send(src, int32(i%b.o.partitions), key(i), b.value); err != nil { //nolint:gosec // a partition count
			_ = pr.close(ctx)
			return err
		}
	}
	if err := pr.close(ctx); err != nil {
		return fmt.Errorf("load source: %w", err)
	}

	// relay quarantines them all.
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	start := time.Now()
	run := exec.Command(b.o.relayBin, "run")
	run.Env = append(append([]string{}, env...), "RELAY_TRANSACTIONAL_ID=relay-bench-"+b.runID+"-console", "RELAY_HTTP_ADDR="+addr)
	tb := &tailBuffer{max: 64 << 10}
	run.Stdout, run.Stderr = tb, tb
	if err := run.Start(); err != nil {
		return err
	}
	for {
		done, err := terminal(ctx, "http://"+addr+"/metrics")
		if err == nil && done >= int64(n) {
			break
		}
		if time.Since(start) > b.o.timeout || ctx.Err() != nil {
			_ = run.Process.Kill()
			_ = run.Wait()
			return fmt.Errorf("relay quarantined %d of %d records in %s: %s", done, n, b.o.timeout, tb.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
	_ = run.Process.Signal(syscall.SIGTERM)
	_ = run.Wait()
	fmt.Printf("relay quarantined %d records in %s\n", n, time.Since(start).Round(time.Second))

	// A plain consumer reading the topics the console reads: the floor
	// of its first read.
	cfg, err := configOf(env)
	if err != nil {
		return err
	}
	read := []string{cfg.StateTopicName(), cfg.Derived(src).Quarantine}
	plain, err := b.plainRead(ctx, read)
	if err != nil {
		return err
	}
	fmt.Printf("a plain consumer reads the state topic and the quarantine topic in %s\n", plain.Round(time.Millisecond))

	// The command's read of the same quarantine.
	stats := exec.Command(b.o.relayBin, "quarantine", "stats")
	stats.Env = env
	t0 := time.Now()
	if out, err := stats.CombinedOutput(); err != nil {
		return fmt.Errorf("relay quarantine stats: %w: %s", err, out)
	}
	statsTook := time.Since(t0)
	statsRSS := stats.ProcessState.SysUsage().(*syscall.Rusage).Maxrss //nolint:forcetypeassert // Linux

	// The console.
	caddr, err := freeAddr()
	if err != nil {
		return err
	}
	con := exec.Command(b.o.relayBin, "console")
	con.Env = append(append([]string{}, env...), "RELAY_CONSOLE_ADDR="+caddr)
	ctb := &tailBuffer{max: 64 << 10}
	con.Stdout, con.Stderr = ctb, ctb
	if err := con.Start(); err != nil {
		return err
	}
	defer func() { _ = con.Process.Kill(); _ = con.Wait() }()
	base := "http://" + caddr
	for {
		if _, err := get(ctx, base+"/healthz"); err == nil {
			break
		}
		if time.Since(start) > b.o.timeout+time.Minute {
			return fmt.Errorf("relay console did not start: %s", ctb.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	pid := strconv.Itoa(con.Process.Pid)
	idle, err := procStatus(pid, "VmRSS")
	if err != nil {
		return err
	}
	fmt.Printf("relay quarantine stats (whole process): %s, peak RSS %d MiB\n", statsTook.Round(time.Millisecond), statsRSS>>10)
	fmt.Printf("relay console idle: RSS %d MiB\n", idle>>10)
	lastPage := (n + 49) / 50
	pages := []struct{ name, path string }{
		{"overview (the first read)", "/"},
		{"overview again", "/"},
		{"list, first page", "/failures"},
		{"list, last page", "/failures?page=" + strconv.Itoa(lastPage)},
		{"list, one key", "/failures?key=k-7"},
	}
	var first string
	var firstRead time.Duration
	for i, p := range pages {
		took, body, err := timedGet(ctx, base+p.path)
		if err != nil {
			return fmt.Errorf("%s: %w", p.path, err)
		}
		fmt.Printf("  %-34s %6s, %d KiB of HTML\n", p.name, took.Round(time.Millisecond), len(body)>>10)
		if i == 0 {
			firstRead = took
			fmt.Printf("  first read / plain consumer: %.2f\n", float64(took)/float64(plain))
		}
		if i == 2 {
			if m := regexp.MustCompile(`href="(/failure\?id=[^"]+)"`).FindStringSubmatch(body); m != nil {
				first = m[1]
			}
		}
	}
	if first != "" {
		took, _, err := timedGet(ctx, base+htmlUnescape(first))
		if err != nil {
			return err
		}
		fmt.Printf("  %-34s %6s\n", "one failure (reads its records)", took.Round(time.Millisecond))
	}
	// A page after the refresh interval is served from what was read and
	// starts a catch-up beside it, which reads only what is new. While
	// the console waits for it, idle, the plain consumer reads again: the
	// first read above came right after the load, when the broker may
	// still be busy with it (its log cleaner among others), and the ratio
	// that counts is the one against the faster of the two reads.
	refreshAt := time.Now().Add(consoleRefresh + time.Second)
	again, err := b.plainRead(ctx, read)
	if err != nil {
		return err
	}
	fmt.Printf("a plain consumer reads them again in %s; first read / the faster plain read: %.2f\n",
		again.Round(time.Millisecond), float64(firstRead)/float64(min(plain, again)))
	time.Sleep(time.Until(refreshAt))
	for _, name := range []string{"overview after 30 s (starts a catch-up)", "overview after the catch-up"} {
		took, _, err := timedGet(ctx, base+"/")
		if err != nil {
			return err
		}
		fmt.Printf("  %-34s %6s\n", name, took.Round(time.Millisecond))
		time.Sleep(5 * time.Second)
	}
	peak, err := procStatus(pid, "VmHWM")
	if err != nil {
		return err
	}
	rss, _ := procStatus(pid, "VmRSS")
	fmt.Printf("relay console after the pages: RSS %d MiB, peak %d MiB; %.0f bytes of peak above idle per quarantined record\n",
		rss>>10, peak>>10, float64((peak-idle)<<10)/float64(n))
	fmt.Printf("console peak / relay quarantine stats peak: %.2f\n", float64(peak)/float64(statsRSS))
	return nil
}

// configOf is relay's configuration from env, as a relay (or an operator
// command) started with it reads it: the last value of a name wins, as in
// a process's environment.
func configOf(env []string) (*config.Config, error) {
	return config.Load(config.ForOperators(func(k string) (string, bool) {
		for _, kv := range slices.Backward(env) {
			if name, v, ok := strings.Cut(kv, "="); ok && name == k {
				return v, true
			}
		}
		return "", false
	}), env)
}

// consoleRefresh is how old a page's snapshot of the quarantine may be
// (the console's DefaultRefresh).
const consoleRefresh = 30 * time.Second

func get(ctx context.Context, url string) (string, error) {
	c, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(c, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %.300s", resp.StatusCode, body)
	}
	return string(body), nil
}

func timedGet(ctx context.Context, url string) (time.Duration, string, error) {
	t0 := time.Now()
	body, err := get(ctx, url)
	return time.Since(t0), body, err
}

func htmlUnescape(s string) string {
	return regexp.MustCompile(`&amp;`).ReplaceAllString(s, "&")
}
