package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// relayProc is mode (b): relay as a subprocess, transactional.
type relayProc struct {
	b      *bench
	t      topics
	cmd    *exec.Cmd
	addr   string
	stderr *tailBuffer
	done   chan struct{}
	once   sync.Once
	hook   *flakyHook // (e) only
}

// admissionStarter runs relay with schema admission and rules; with
// hookFailPct >= 0 also with a hook that fails that share of records once.
// The in-place retry is off (RELAY_BLOCKING_ATTEMPTS=0): failed records go
// to a 1s tier at once, so the run measures the tier path, not sleeps.
func (b *bench) admissionStarter(hookFailPct int, delay time.Duration, extra ...string) func(context.Context, topics) (passthrough, error) {
	return func(ctx context.Context, t topics) (passthrough, error) {
		a, err := b.setupAdmission()
		if err != nil {
			return nil, err
		}
		env := a.env(b.o.registry)
		var h *flakyHook
		byKey := false
		for _, e := range extra {
			byKey = byKey || e == "RELAY_ORDERING=key"
		}
		if hookFailPct >= 0 {
			if h, err = startFlakyHook(hookFailPct, byKey, delay); err != nil {
				return nil, err
			}
			env = append(env, "RELAY_HOOK_URL="+h.url(), "RELAY_HOOK_TIMEOUT=1s",
				"RELAY_BLOCKING_ATTEMPTS=0", "RELAY_RETRY_TIERS=1s", "RELAY_RETRY_MAX_ATTEMPTS=5")
		}
		env = append(env, extra...)
		pt, err := b.relayStarter(env)(ctx, t)
		if err != nil {
			if h != nil {
				h.close()
			}
			return nil, err
		}
		pt.(*relayProc).hook = h
		return pt, nil
	}
}

func (b *bench) relayStarter(extra []string) func(context.Context, topics) (passthrough, error) {
	return func(_ context.Context, t topics) (passthrough, error) {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(b.o.relayBin, "run")
		cmd.Env = []string{
			"PATH=" + os.Getenv("PATH"),
			"RELAY_SOURCE_TOPICS=" + t.src,
			"RELAY_GROUP_ID=" + t.group,
			"RELAY_TRANSACTIONAL_ID=relay-bench-" + b.runID + "-" + t.src,
			"RELAY_KAFKA_BOOTSTRAP_SERVERS=" + b.o.bootstrap,
			"RELAY_HTTP_ADDR=" + addr,
			"RELAY_LOG_LEVEL=warn",
		}
		cmd.Env = append(cmd.Env, extra...)
		if err := b.applyTopics(cmd.Env); err != nil {
			return nil, err
		}
		r := &relayProc{b: b, t: t, cmd: cmd, addr: addr, stderr: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
		cmd.Stdout, cmd.Stderr = r.stderr, r.stderr
		var logFile *os.File
		if b.o.relayLogs != "" {
			cmd.Env = append(cmd.Env, "RELAY_LOG_LEVEL=debug") // the later value wins
			if logFile, err = os.CreateTemp(b.o.relayLogs, "relay-*.log"); err != nil {
				return nil, err
			}
			cmd.Stdout, cmd.Stderr = io.MultiWriter(r.stderr, logFile), io.MultiWriter(r.stderr, logFile)
		}
		if err := cmd.Start(); err != nil {
			if logFile != nil {
				_ = logFile.Close()
			}
			return nil, fmt.Errorf("start relay: %w", err)
		}
		if logFile != nil {
			fmt.Printf("  relay (pid %d) logs to %s\n", cmd.Process.Pid, logFile.Name())
		}
		go func() {
			_ = cmd.Wait()
			if logFile != nil {
				_ = logFile.Close()
			}
			close(r.done)
		}()
		return r, nil
	}
}

// freeAddr picks a free loopback port for relay's HTTP endpoint.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String(), nil
}

func (r *relayProc) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *relayProc) check() error {
	if r.exited() {
		return fmt.Errorf("relay exited early (%s); its output:\n%s", r.cmd.ProcessState, r.stderr.String())
	}
	return nil
}

// caughtUp: relay's group has committed the source's end offsets, so every
// backlog record is in a committed transaction, and relay counts every
// record as done.
func (r *relayProc) caughtUp(ctx context.Context) (bool, error) {
	if ok, err := r.b.groupCaughtUp(ctx, r.t); !ok || err != nil {
		return false, err
	}
	// Records in a retry tier are committed at the source but not done:
	// done is every record in a terminal state, by relay's own count.
	// A failed scrape asks again.
	n, err := terminal(ctx, "http://"+r.addr+"/metrics")
	return err == nil && n >= sum(r.t.end), nil
}

// finish reads peak RSS and the counters, then stops relay with SIGTERM
// and expects exit 0.
func (r *relayProc) finish(ctx context.Context, res *result) error {
	if err := r.check(); err != nil {
		return err
	}
	res.relay = true
	var err error
	if res.rssKB, err = relayMemory(r.cmd.Process.Pid, "VmHWM"); err != nil {
		return err
	}
	fmt.Printf("  relay's peak RSS: %s\n", memoryParts(r.cmd.Process.Pid))
	m, err := scrape(ctx, "http://"+r.addr+"/metrics")
	if err != nil {
		return err
	}
	res.txnCommitted = m["relay_transactions_committed_total"]
	res.txnAborted = m["relay_transactions_aborted_total"]
	for name, v := range m {
		if strings.HasPrefix(name, "relay_commit_duration") {
			switch {
			case strings.HasSuffix(name, "_sum"):
				res.commitSum = v
			case strings.HasSuffix(name, "_count"):
				res.commitCount = v
			}
		}
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(40 * time.Second):
		r.kill()
		return fmt.Errorf("relay did not stop within 40s of SIGTERM; its output:\n%s", r.stderr.String())
	}
	if code := r.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("relay exited %d after SIGTERM; its output:\n%s", code, r.stderr.String())
	}
	return nil
}

func (r *relayProc) kill() {
	r.once.Do(func() {
		if r.hook != nil {
			defer r.hook.close()
		}
		if !r.exited() {
			_ = r.cmd.Process.Kill()
		}
		<-r.done
	})
}

// scrape reads a Prometheus text endpoint and sums each metric's samples
// over their labels.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(c, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if j := strings.LastIndex(rest, "}"); j >= 0 {
			rest = rest[j+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			out[name] += v
		}
	}
	return out, sc.Err()
}

func (r *relayProc) pid() int { return r.cmd.Process.Pid }
