package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// streamsProc is mode (k): the Kafka Streams exactly_once_v2 passthrough
// of cmd/relay-bench/streams, in a JVM of its own, a peer of relay (b).
type streamsProc struct {
	t        topics
	b        *bench
	cmd      *exec.Cmd
	out      *tailBuffer
	stateDir string
	start    time.Time
	done     chan struct{}
	once     sync.Once

	mu     sync.Mutex
	ready  time.Duration // start → state RUNNING, the first time
	flags  string        // the JVM's -XX:+PrintCommandLineFlags line
	closed bool          // it said it closed after SIGTERM
}

// The main class of cmd/relay-bench/streams and the jar it is built into.
const (
	streamsMain = "relaybench.StreamsPassthrough"
	streamsJar  = "relay-bench-streams.jar"
)

// streamsJVMArgs: the JVM's own defaults for heap and GC; it prints the
// flags its ergonomics chose, which the report shows.
func (o *options) streamsJVMArgs() []string {
	args := []string{"-XX:+PrintCommandLineFlags"}
	args = append(args, strings.Fields(o.streamsJVM)...)
	cp := filepath.Join(o.streams, streamsJar) + string(os.PathListSeparator) + filepath.Join(o.streams, "lib", "*")
	return append(args, "-cp", cp, streamsMain)
}

func (b *bench) streamsStarter() func(context.Context, topics) (passthrough, error) {
	return func(_ context.Context, t topics) (passthrough, error) {
		dir, err := os.MkdirTemp("", "relay-bench-streams-")
		if err != nil {
			return nil, err
		}
		// The group of the application id is the group whose offsets
		// say the backlog is through.
		args := append(b.o.streamsJVMArgs(), b.o.bootstrap, t.group, t.src, t.out, dir)
		cmd := exec.Command(b.o.java, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		if h := os.Getenv("JAVA_HOME"); h != "" {
			cmd.Env = append(cmd.Env, "JAVA_HOME="+h)
		}
		s := &streamsProc{t: t, b: b, cmd: cmd, out: &tailBuffer{max: 64 << 10}, stateDir: dir, done: make(chan struct{})}
		cmd.Stdout = &lineWriter{tail: s.out, each: s.line}
		cmd.Stderr = s.out
		s.start = time.Now()
		if err := cmd.Start(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("start %s: %w", b.o.java, err)
		}
		go func() { _ = cmd.Wait(); close(s.done) }()
		return s, nil
	}
}

// line follows what the JVM and the app print on stdout.
func (s *streamsProc) line(l string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case strings.HasPrefix(l, "-XX:") && s.flags == "":
		s.flags = l
	case strings.HasSuffix(l, "-> RUNNING") && s.ready == 0:
		s.ready = time.Since(s.start)
	case l == "relay-bench-streams: closed":
		s.closed = true
	}
}

func (s *streamsProc) pid() int { return s.cmd.Process.Pid }

func (s *streamsProc) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *streamsProc) check() error {
	if s.exited() {
		return fmt.Errorf("the Kafka Streams app exited early (%s); its output:\n%s", s.cmd.ProcessState, s.out.String())
	}
	return nil
}

// caughtUp: the application's group has committed the source's end
// offsets, so every backlog record is in a committed transaction.
func (s *streamsProc) caughtUp(ctx context.Context) (bool, error) {
	return s.b.groupCaughtUp(ctx, s.t)
}

// finish reads the JVM's peak RSS, then stops it with SIGTERM: its shutdown
// hook closes Kafka Streams, and a JVM ended by SIGTERM exits 143.
func (s *streamsProc) finish(_ context.Context, res *result) error {
	if err := s.check(); err != nil {
		return err
	}
	var err error
	if res.rssKB, err = vmHWM(s.pid()); err != nil {
		return err
	}
	s.mu.Lock()
	res.ready, res.jvmFlags = s.ready, s.flags
	s.mu.Unlock()
	fmt.Printf("   JVM: %s %s\n   JVM flags: %s\n   state RUNNING after %.2fs; peak RSS %.1f MiB\n",
		s.b.o.java, strings.Join(s.cmd.Args[1:], " "), res.jvmFlags, res.ready.Seconds(), float64(res.rssKB)/1024)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(40 * time.Second):
		s.kill()
		return fmt.Errorf("the Kafka Streams app did not stop within 40s of SIGTERM; its output:\n%s", s.out.String())
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if code := s.cmd.ProcessState.ExitCode(); (code != 0 && code != 128+int(syscall.SIGTERM)) || !closed {
		return fmt.Errorf("the Kafka Streams app exited %d after SIGTERM (closed: %t); its output:\n%s", code, closed, s.out.String())
	}
	return nil
}

func (s *streamsProc) kill() {
	s.once.Do(func() {
		if !s.exited() {
			_ = s.cmd.Process.Kill()
		}
		<-s.done
		_ = os.RemoveAll(s.stateDir)
	})
}

// checkStreams says what is missing to run mode (k).
func (o *options) checkStreams() error {
	if o.streams == "" {
		return nil
	}
	var errs []error
	if _, err := os.Stat(filepath.Join(o.streams, streamsJar)); err != nil {
		errs = append(errs, fmt.Errorf("-streams: %w (build it with: scripts/tools/streams-bench.sh install)", err))
	}
	if _, err := exec.LookPath(o.java); err != nil {
		errs = append(errs, fmt.Errorf("-java: %w", err))
	}
	return errors.Join(errs...)
}

// printPeers sets relay (b) beside Kafka Streams (k), when both ran, with
// the targets: throughput >= 2x, peak RSS <= 0.25x.
func printPeers(rs []*result) {
	b, k := mode(rs, "(b)"), mode(rs, "(k)")
	if b == nil || k == nil {
		return
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	tp, rss := b.recPerSec()/k.recPerSec(), float64(b.rssKB)/float64(k.rssKB)
	fmt.Println()
	fmt.Println("relay (b) beside Kafka Streams exactly_once_v2 (k), same run:")
	fmt.Printf("  %-22s %12s %12s %10s\n", "", "relay (b)", "Streams (k)", "(b)/(k)")
	fmt.Printf("  %-22s %12.0f %12.0f %10.3f  target >= 2: %s\n", "throughput rec/s", b.recPerSec(), k.recPerSec(), tp, met(tp >= 2))
	fmt.Printf("  %-22s %12.0f %12.0f %10.3f\n", "steady rec/s", b.steady(), k.steady(), b.steady()/k.steady())
	fmt.Printf("  %-22s %12.2f %12.2f %10.3f\n", "startup s (1st output)", b.startup.Seconds(), k.startup.Seconds(), b.startup.Seconds()/k.startup.Seconds())
	fmt.Printf("  %-22s %12.1f %12.1f %10.3f  target <= 0.25: %s\n", "peak RSS MiB", float64(b.rssKB)/1024, float64(k.rssKB)/1024, rss, met(rss <= 0.25))
	fmt.Printf("  %-22s %12.1f %12.1f %10.3f\n", "CPU µs/record", b.cpuPerRecord(), k.cpuPerRecord(), b.cpuPerRecord()/k.cpuPerRecord())
	fmt.Printf("  %-22s %12.1f %12.1f %10.3f\n", "  after 1st output", b.steadyCPUPerRecord(), k.steadyCPUPerRecord(), b.steadyCPUPerRecord()/k.steadyCPUPerRecord())
	fmt.Printf("  %-22s %12.1f %12.1f\n", "latency p50 ms", ms64(b.lat.p50), ms64(k.lat.p50))
	fmt.Printf("  %-22s %12.1f %12.1f\n", "latency p99 ms", ms64(b.lat.p99), ms64(k.lat.p99))
	fmt.Printf("  (k) JVM flags: %s\n", k.jvmFlags)
}

func ms64(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
