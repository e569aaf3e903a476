package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// `relay run` is two processes: the daemon, and a small supervisor of it
// (the same binary) that the operator, the kubelet or systemd starts. The
// supervisor exists for the crashes recover cannot catch: a panic on a
// goroutine relay did not start (librdkafka's event goroutines in
// confluent-kafka-go), a Go runtime fatal error (concurrent map writes,
// out of memory), a signal in C code. Go ends the process with status 2
// then, which relay documents as a bad configuration. The supervisor sees
// the crash (the runtime writes it to a pipe too, debug.SetCrashOutput),
// says it is one, and exits 1.
//
// The daemon takes no signal of its own: its SIGINT, SIGTERM and SIGHUP
// come from the supervisor, through a second pipe. So a stop signalled to
// every process of the group (a terminal's Ctrl-C, systemd's default
// KillMode, pkill) is one stop, not the "second signal" that abandons the
// graceful stop. The daemon dies with the supervisor (SIGKILL by the
// kernel, PR_SET_PDEATHSIG): a SIGKILL of relay is a SIGKILL of both.

// envSupervisor names the supervisor's pid in the daemon's environment.
// The daemon trusts it only when it is its parent's pid, and removes it
// from its environment.
const envSupervisor = "RELAY_SUPERVISOR_PID"

// The daemon's descriptors from its supervisor.
const (
	crashFD   = 3 // the write end of the crash pipe
	signalsFD = 4 // the read end of the signal pipe: one byte per signal
)

// crashReport bounds what the supervisor keeps of a crash: its first line
// is the reason; the whole report is on stderr already.
const crashReport = 64 << 10

// supervisedByParent reports whether this process is the daemon under a
// supervisor.
func supervisedByParent(lookup func(string) (string, bool)) bool {
	v, ok := lookup(envSupervisor)
	if !ok {
		return false
	}
	pid, err := strconv.Atoi(v)
	return err == nil && pid == os.Getppid()
}

// superviseRun starts the daemon as a child process with args and the
// environment of this one, relays signals to it, and returns the exit code
// relay ends with.
func superviseRun(args []string, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "relay: cannot find its own executable to run the daemon: %v\n", err)
		return exitFailure
	}
	crashR, crashW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "relay: %v\n", err)
		return exitFailure
	}
	defer func() { _ = crashR.Close() }()
	sigR, sigW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "relay: %v\n", err)
		return exitFailure
	}
	defer func() { _ = sigW.Close() }()

	// The daemon's stderr passes through here: a fatal error's first line
	// ("fatal error: …") is written to stderr only, not to the crash pipe.
	tail := &tailBuffer{max: crashReport, out: os.Stderr}
	// Never cancelled: the daemon ends by the signals relayed to it, or
	// with this process (Pdeathsig).
	cmd := exec.CommandContext(context.Background(), exe, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, tail
	cmd.WaitDelay = time.Second               // a descendant holding stderr
	cmd.ExtraFiles = []*os.File{crashW, sigR} // crashFD, signalsFD
	cmd.Env = append(os.Environ(), envSupervisor+"="+strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	// Subscribed before the start: a signal from now on is the daemon's.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)

	// The kernel sends Pdeathsig when the thread that started the child
	// ends, not the process: that thread stays locked to this goroutine,
	// which lives as long as the child.
	started, ended := make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		ended <- cmd.Wait()
	}()
	err = <-started
	_ = crashW.Close() // the daemon has its own copies
	_ = sigR.Close()
	if err != nil {
		fmt.Fprintf(stderr, "relay: cannot start the daemon: %v\n", err)
		return exitFailure
	}

	crash := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(crashR, crashReport))
		_, _ = io.Copy(io.Discard, crashR) // the rest of a long report
		crash <- b
	}()

	for {
		select {
		case s := <-sigs:
			n := s.(syscall.Signal)
			if n == syscall.SIGQUIT {
				// Go's goroutine dump, from the process that has the
				// goroutines.
				_ = cmd.Process.Signal(n)
				continue
			}
			_, _ = sigW.Write([]byte{byte(n)})
		case err := <-ended:
			var report []byte
			select {
			case report = <-crash:
			case <-time.After(time.Second): // a descendant holds the pipe
			}
			return daemonEnded(err, report, tail.bytes(), stderr)
		}
	}
}

// daemonEnded is relay's exit code for how its daemon process ended: a
// crash the runtime reported is a runtime failure (1), whatever status Go
// gave it, and so is a death by a signal (the supervisor was not killed:
// the daemon alone was, by hand or by the kernel's out-of-memory killer);
// any other status is the daemon's own.
func daemonEnded(err error, report, stderrTail []byte, stderr io.Writer) int {
	if len(bytes.TrimSpace(report)) > 0 {
		fmt.Fprintf(stderr, "relay: internal error (a bug in relay, not a configuration problem; nothing past the committed offsets is lost): the daemon crashed: %s\n", crashReason(report, stderrTail))
		return exitFailure
	}
	if err == nil {
		return exitOK
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		fmt.Fprintf(stderr, "relay: the daemon process: %v\n", err)
		return exitFailure
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		fmt.Fprintf(stderr, "relay: the daemon process was killed by %s (%v; nothing past the committed offsets is lost)\n", unix.SignalName(ws.Signal()), ws.Signal())
		return exitFailure
	}
	return ee.ExitCode()
}

// crashReason is the line of a runtime crash report that says why:
// "panic: …", "fatal error: …", "SIGSEGV: …". A panic's is the report's
// first line. A fatal error's is written to stderr only, just before the
// report: it is the last such line of stderr before the report's first.
func crashReason(report, stderrTail []byte) string {
	first, _, _ := strings.Cut(strings.TrimSpace(string(report)), "\n")
	if isCrashReason(first) {
		return first
	}
	before := string(stderrTail)
	if i := strings.LastIndex(before, first); i >= 0 {
		before = before[:i]
	}
	lines := strings.Split(before, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if isCrashReason(lines[i]) {
			return lines[i]
		}
	}
	return "a Go runtime crash (its report is above)"
}

func isCrashReason(line string) bool {
	if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
		return true
	}
	name, _, ok := strings.Cut(line, ": ") // SIGSEGV: segmentation violation
	return ok && strings.HasPrefix(name, "SIG") && strings.ToUpper(name) == name && !strings.Contains(name, " ")
}

// tailBuffer passes what is written to out, and keeps the last max bytes
// of it (and up to max more: trimmed when it doubles, so a write costs its
// own length amortized). A failed write to out is not the daemon's: were
// it returned, the copy would stop and the daemon's next log line would
// meet a closed pipe.
type tailBuffer struct {
	out io.Writer
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	_, _ = t.out.Write(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.b)
}

// becomeSupervised sets up the daemon's side: crashes are written to the
// supervisor too, signals come from it (direct ones are ignored, see
// above), and the daemon ends when the supervisor is gone. It returns the
// daemon's signals.
func becomeSupervised(stderr io.Writer) (<-chan os.Signal, error) {
	_ = os.Unsetenv(envSupervisor)
	crash := os.NewFile(crashFD, "crash")
	from := os.NewFile(signalsFD, "signals")
	if crash == nil || from == nil {
		return nil, errors.New("the supervisor's pipes are missing")
	}
	if err := debug.SetCrashOutput(crash, debug.CrashOptions{}); err != nil {
		return nil, fmt.Errorf("crash output: %w", err)
	}
	_ = crash.Close() // SetCrashOutput keeps its own descriptor
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	sigs := make(chan os.Signal, 4)
	go func() {
		r := bufio.NewReader(from)
		for {
			b, err := r.ReadByte()
			if err != nil {
				// The supervisor is gone without waiting for the daemon:
				// it was killed, and Pdeathsig is on its way. End as it
				// would have.
				fmt.Fprintln(stderr, "relay: the supervisor process is gone; the daemon ends with it")
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				return
			}
			select {
			case sigs <- syscall.Signal(b):
			default: // as signal.Notify: a full buffer drops the signal
			}
		}
	}()
	return sigs, nil
}
