// Package supervise is the supervisor of `relay run`: the daemon runs as
// a child process of a small supervisor (the same binary), which relays
// the operator's signals to it and reports the crashes the daemon cannot
// report itself.
package supervise

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
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

// The exit codes the supervisor makes of a daemon's end (relay's: see
// docs/REFERENCE.md).
const (
	codeOK      = 0
	codeFailure = 1 // a runtime failure, a crash above all
)

// envSupervisor names the supervisor's pid in the daemon's environment.
// The daemon trusts it only when it is its parent's pid and its
// descriptors from the supervisor are pipes, and removes it from its
// environment.
const envSupervisor = "RELAY_SUPERVISOR_PID"

// The daemon's descriptors from its supervisor.
const (
	crashFD   = 3 // the write end of the crash pipe
	signalsFD = 4 // the read end of the signal pipe: one byte per signal
)

// crashReport bounds what the supervisor keeps of a crash report: its
// first line may be the reason; the whole report is on stderr already.
const crashReport = 64 << 10

// ByParent reports whether this process is the daemon under a
// supervisor.
func ByParent(lookup func(string) (string, bool)) bool {
	v, ok := lookup(envSupervisor)
	if !ok {
		return false
	}
	pid, err := strconv.Atoi(v)
	return err == nil && pid == os.Getppid()
}

// Run runs the daemon as a child process with args and the
// environment of this one, relays signals to it, and returns the exit code
// relay ends with.
func Run(args []string, stderr io.Writer) int {
	// The supervisor is the daemon's binary, and ran every package's init
	// as the daemon does: the schema formats' validators compile their
	// meta-schemas there, about 3 MB of heap the supervisor never uses.
	// Handed back to the kernel now: 1.8 MiB less private memory.
	debug.FreeOSMemory()
	// Subscribed first: from now on a signal is the daemon's. A broken
	// stderr must not end the supervisor (Go raises SIGPIPE for a write to
	// a closed stderr), for the daemon would die with it mid-transaction.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	signal.Ignore(syscall.SIGPIPE)
	exe, err := os.Executable()
	if err != nil && filepath.IsAbs(os.Args[0]) {
		// Linux tells the executable through /proc, which a bare chroot
		// lacks; a container's entrypoint names it by its absolute path.
		exe, err = os.Args[0], nil
	}
	if err != nil {
		fmt.Fprintf(stderr, "relay: cannot find its own executable to run the daemon: %v\n", err)
		return codeFailure
	}
	for {
		s := &supervision{sigs: sigs, stderr: stderr}
		code, again := s.run(exe, args)
		if !again {
			return code
		}
	}
}

// supervision is one run of the daemon process.
type supervision struct {
	sigs   <-chan os.Signal
	stderr io.Writer
	// What the supervisor passed on: a stop (SIGINT, SIGTERM), a SIGHUP,
	// a SIGQUIT.
	stop, hup, quit bool
}

// run runs the daemon once; again is true when it died of a SIGHUP before
// it could ignore one (just after its start), to be started anew.
func (s *supervision) run(exe string, args []string) (code int, again bool) {
	crashR, crashW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(s.stderr, "relay: %v\n", err)
		return codeFailure, false
	}
	defer func() { _ = crashR.Close() }()
	sigR, sigW, err := os.Pipe()
	if err != nil {
		_ = crashW.Close()
		fmt.Fprintf(s.stderr, "relay: %v\n", err)
		return codeFailure, false
	}
	defer func() { _ = sigW.Close() }()

	// The daemon's stderr passes through here: a fatal error's reason
	// ("fatal error: …") is written to stderr only, not to the crash pipe.
	errs := &crashLines{out: os.Stderr}
	// Never cancelled: the daemon ends by the signals relayed to it, or
	// with this process (Pdeathsig).
	cmd := exec.CommandContext(context.Background(), exe, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, errs
	cmd.WaitDelay = time.Second               // a descendant holding stderr
	cmd.ExtraFiles = []*os.File{crashW, sigR} // crashFD, signalsFD
	cmd.Env = append(os.Environ(), envSupervisor+"="+strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

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
		fmt.Fprintf(s.stderr, "relay: cannot start the daemon: %v\n", err)
		return codeFailure, false
	}

	crash := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(crashR, crashReport))
		_, _ = io.Copy(io.Discard, crashR) // the rest of a long report
		crash <- b
	}()

	for {
		select {
		case sig := <-s.sigs:
			n := sig.(syscall.Signal)
			switch n {
			case syscall.SIGQUIT:
				// Go's goroutine dump, from the process that has the
				// goroutines.
				s.quit = true
				_ = cmd.Process.Signal(n)
				continue
			case syscall.SIGHUP:
				s.hup = true
			default:
				s.stop = true
			}
			_, _ = sigW.Write([]byte{byte(n)})
		case err := <-ended:
			var report []byte
			select {
			case report = <-crash:
			case <-time.After(time.Second): // a descendant holds the pipe
			}
			// How the daemon ended is its process state; Wait's error adds
			// nothing to it (an exit status, or a descendant that kept its
			// stderr past WaitDelay), unless the wait itself failed.
			return s.ended(cmd.ProcessState, err, report, errs.reason())
		}
	}
}

// ended is relay's exit code for how its daemon process ended:
//   - a crash the runtime reported is a runtime failure (1), whatever
//     status Go gave it; a goroutine dump asked for with SIGQUIT says so;
//   - a death by SIGINT or SIGTERM after relay was asked to stop is a
//     stop (0): the signal reached the daemon just after its start, before
//     it could leave its signals to the supervisor, and before it started
//     anything; the same death by SIGHUP starts the daemon anew;
//   - any other death by a signal is a runtime failure (the supervisor was
//     not killed: the daemon alone was, by hand or by the kernel's
//     out-of-memory killer);
//   - any other status is the daemon's own.
func (s *supervision) ended(state *os.ProcessState, waitErr error, report []byte, stderrReason string) (code int, again bool) {
	if len(bytes.TrimSpace(report)) > 0 {
		reason := crashReason(report, stderrReason)
		if s.quit && strings.HasPrefix(reason, "SIGQUIT") {
			fmt.Fprintf(s.stderr, "relay: the daemon printed its goroutines and stopped on SIGQUIT, as asked (nothing past the committed offsets is lost)\n")
			return codeFailure, false
		}
		fmt.Fprintf(s.stderr, "relay: internal error (a bug in relay, not a configuration problem; nothing past the committed offsets is lost): the daemon crashed: %s\n", reason)
		return codeFailure, false
	}
	if state == nil {
		fmt.Fprintf(s.stderr, "relay: the daemon process: %v\n", waitErr)
		return codeFailure, false
	}
	ws, ok := state.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return state.ExitCode(), false
	}
	switch sig := ws.Signal(); {
	case s.stop && (sig == syscall.SIGINT || sig == syscall.SIGTERM):
		fmt.Fprintf(s.stderr, "relay: stopped by %s before the daemon started\n", unix.SignalName(sig))
		return codeOK, false
	case s.hup && sig == syscall.SIGHUP && !s.stop:
		fmt.Fprintf(s.stderr, "relay: SIGHUP reached the daemon as it started; starting it again\n")
		return 0, true
	default:
		fmt.Fprintf(s.stderr, "relay: the daemon process was killed by %s (%v; nothing past the committed offsets is lost)\n", unix.SignalName(sig), sig)
		return codeFailure, false
	}
}

// crashReason is the line of a runtime crash report that says why:
// "panic: …", "fatal error: …", "SIGSEGV: …". A panic's is the report's
// first line. A fatal error's is written to stderr only, just before the
// report: stderrReason, the last such line of stderr.
func crashReason(report []byte, stderrReason string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(string(report)), "\n")
	switch {
	case isCrashReason(first):
		return first
	case stderrReason != "":
		return stderrReason
	default:
		return "a Go runtime crash (its report is above)"
	}
}

func isCrashReason(line string) bool {
	if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
		return true
	}
	name, _, ok := strings.Cut(line, ": ") // SIGSEGV: segmentation violation
	return ok && strings.HasPrefix(name, "SIG") && strings.ToUpper(name) == name && !strings.Contains(name, " ")
}

// crashLines passes what is written to out, and remembers the last line
// that reads as a crash's reason, however long the report after it. A
// failed write to out is not the daemon's: were it returned, the copy
// would stop and the daemon's next log line would meet a closed pipe.
type crashLines struct {
	out  io.Writer
	mu   sync.Mutex
	line []byte // the line being written, up to maxLine
	last string
}

const maxLine = 4 << 10

func (c *crashLines) Write(p []byte) (int, error) {
	_, _ = c.out.Write(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	for rest := p; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		chunk := rest
		if i >= 0 {
			chunk = rest[:i]
		}
		if room := maxLine - len(c.line); room > 0 {
			c.line = append(c.line, chunk[:min(len(chunk), room)]...)
		}
		if i < 0 {
			break
		}
		if l := string(c.line); isCrashReason(l) {
			c.last = l
		}
		c.line = c.line[:0]
		rest = rest[i+1:]
	}
	return len(p), nil
}

func (c *crashLines) reason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// Become sets up the daemon's side: crashes are written to the
// supervisor too, signals come from it, and the daemon ends when the
// supervisor is gone. It returns the daemon's signals.
//
// A signal sent to the daemon directly (to every process of the group, or
// to the daemon's pid alone) is not acted on: the supervisor relays its
// own copy. The first one is named on stderr, for whoever signalled the
// wrong process.
func Become(stderr io.Writer) (<-chan os.Signal, error) {
	for _, fd := range []int{crashFD, signalsFD} {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			return nil, fmt.Errorf("%s is set, but relay was not started by its supervisor (descriptor %d is not its pipe): unset %s", envSupervisor, fd, envSupervisor)
		}
	}
	supervisor := os.Getppid()
	_ = os.Unsetenv(envSupervisor)
	direct := make(chan os.Signal, 1)
	signal.Notify(direct, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	crash := os.NewFile(crashFD, "crash")
	if err := debug.SetCrashOutput(crash, debug.CrashOptions{}); err != nil {
		return nil, fmt.Errorf("crash output: %w", err)
	}
	_ = crash.Close() // SetCrashOutput keeps its own descriptor
	unix.CloseOnExec(signalsFD)
	from := os.NewFile(signalsFD, "signals")
	go func() {
		s := <-direct
		fmt.Fprintf(stderr, "relay: %s reached the daemon process (pid %d) directly; relay acts on the copy its supervisor (pid %d) relays. A signal sent to the daemon alone does nothing: signal the supervisor\n",
			unix.SignalName(s.(syscall.Signal)), os.Getpid(), supervisor)
		for range direct { //nolint:revive // the rest is dropped
		}
	}()
	sigs := make(chan os.Signal, 4)
	go func() {
		r := bufio.NewReader(from)
		for {
			b, err := r.ReadByte()
			if err != nil {
				// The supervisor is gone without waiting for the daemon:
				// it was killed, and Pdeathsig is on its way. End as it
				// would have.
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
