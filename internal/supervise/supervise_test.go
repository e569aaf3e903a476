package supervise

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// envTestDaemon makes this test binary relay's supervisor and, under it,
// a daemon that does what the value says (see TestMain).
const envTestDaemon = "RELAY_TEST_DAEMON"

// TestMain runs the test binary as `relay run` when a test asks: the
// supervisor is the real one (Run), and so is the daemon's side
// of it (Become); what the daemon then does stands in for a
// crash, or reports the signals it receives.
func TestMain(m *testing.M) {
	mode, ok := os.LookupEnv(envTestDaemon)
	if !ok {
		os.Exit(m.Run())
	}
	if !ByParent(os.LookupEnv) {
		os.Exit(Run(os.Args[1:], os.Stderr))
	}
	sigs, err := Become(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2) // as main
	}
	fmt.Printf("ready %d\n", os.Getpid())
	switch mode {
	case "panic": // on a goroutine relay did not start, as librdkafka's
		go func() { panic("a panic on a goroutine relay did not start") }()
	case "fatal": // a Go runtime fatal error, beyond recover
		var mu sync.Mutex
		mu.Unlock() //nolint:staticcheck // the point
	case "exit":
		os.Exit(3)
	case "signals": // print each signal; end after SIGTERM
		for s := range sigs {
			fmt.Println(s)
			if s == syscall.SIGTERM {
				time.Sleep(300 * time.Millisecond) // would a second one come?
				select {
				case s := <-sigs:
					fmt.Println("again", s)
				default:
				}
				os.Exit(codeOK)
			}
		}
	}
	time.Sleep(time.Hour) // "sleep": until killed
	os.Exit(codeOK)
}

// daemonProc is this test binary running as `relay run` with a test daemon.
type daemonProc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	lines  chan string // the daemon's stdout
	child  int         // the daemon's pid
}

func startDaemon(t *testing.T, mode string) *daemonProc {
	t.Helper()
	d := &daemonProc{cmd: exec.Command(os.Args[0], "run"), lines: make(chan string, 16)}
	d.cmd.Env = append(os.Environ(), envTestDaemon+"="+mode)
	d.cmd.Stderr = &d.stderr
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.cmd.Process.Kill(); _ = d.cmd.Wait() })
	go func() {
		defer close(d.lines)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			d.lines <- sc.Text()
		}
	}()
	ready := d.next(t)
	pid, err := strconv.Atoi(strings.TrimPrefix(ready, "ready "))
	if err != nil || pid == d.cmd.Process.Pid {
		t.Fatalf("the daemon said %q; want its own pid, not the supervisor's", ready)
	}
	d.child = pid
	return d
}

func (d *daemonProc) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-d.lines:
		if !ok {
			t.Fatalf("the daemon's output ended; stderr:\n%s", d.stderr.String())
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("the daemon said nothing in 30 s; stderr:\n%s", d.stderr.String())
		return ""
	}
}

func (d *daemonProc) exit(t *testing.T) int {
	t.Helper()
	for range d.lines { //nolint:revive // drained before Wait, as StdoutPipe asks
	}
	err := d.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// Regression: a panic on a goroutine relay does not start (confluent-kafka-
// go's event goroutines) and a Go runtime fatal error ended relay with Go's
// status 2, the code relay documents for a bad configuration. They are
// crashes: exit 1, saying it is a bug and why, with the runtime's report.
func TestRuntimeCrashIsExitOne(t *testing.T) {
	for mode, reason := range map[string]string{
		"panic": "panic: a panic on a goroutine relay did not start",
		"fatal": "fatal error: sync: unlock of unlocked mutex",
	} {
		t.Run(mode, func(t *testing.T) {
			d := startDaemon(t, mode)
			if code := d.exit(t); code != codeFailure {
				t.Fatalf("exit %d, want %d (runtime failure); stderr:\n%s", code, codeFailure, d.stderr.String())
			}
			stderr := d.stderr.String()
			if !strings.Contains(stderr, "relay: internal error (a bug in relay") || !strings.Contains(stderr, "the daemon crashed: "+reason) {
				t.Errorf("stderr does not say it crashed, and why (%q):\n%s", reason, stderr)
			}
			if !strings.Contains(stderr, "goroutine ") {
				t.Errorf("stderr lost the runtime's report:\n%s", stderr)
			}
		})
	}
}

// The daemon's own exit code is relay's.
func TestSupervisorKeepsTheDaemonsExitCode(t *testing.T) {
	d := startDaemon(t, "exit")
	if code := d.exit(t); code != 3 {
		t.Fatalf("exit %d, want the daemon's %d; stderr:\n%s", code, 3, d.stderr.String())
	}
}

// Signals reach the daemon through the supervisor, once: a SIGTERM sent to
// both processes (a terminal's Ctrl-C, systemd's default KillMode, pkill)
// is one stop, not the second signal that abandons a graceful stop; the
// daemon's direct SIGTERM is not its death. SIGHUP reaches it too.
func TestSupervisorRelaysSignalsOnce(t *testing.T) {
	d := startDaemon(t, "signals")
	_ = d.cmd.Process.Signal(syscall.SIGHUP)
	if got := d.next(t); got != "hangup" {
		t.Fatalf("after SIGHUP the daemon said %q", got)
	}
	_ = syscall.Kill(d.child, syscall.SIGTERM)
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	if got := d.next(t); got != "terminated" {
		t.Fatalf("after SIGTERM the daemon said %q", got)
	}
	var rest []string
	for l := range d.lines {
		rest = append(rest, l)
	}
	if len(rest) > 0 {
		t.Errorf("the daemon received more than one stop: %q", rest)
	}
	if code := d.exit(t); code != codeOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, d.stderr.String())
	}
}

// A daemon killed alone (by hand, or by the out-of-memory killer, which
// picks the larger process) is a runtime failure that says so, not a
// status outside relay's exit codes.
func TestDaemonKilledIsExitOne(t *testing.T) {
	d := startDaemon(t, "sleep")
	_ = syscall.Kill(d.child, syscall.SIGKILL)
	if code := d.exit(t); code != codeFailure {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, codeFailure, d.stderr.String())
	}
	if !strings.Contains(d.stderr.String(), "the daemon process was killed by SIGKILL") {
		t.Errorf("stderr does not say the daemon was killed:\n%s", d.stderr.String())
	}
}

// SIGQUIT dumps the daemon's goroutines (the supervisor's would show
// nothing), and relay says it stopped as asked, not that it crashed.
func TestSupervisorRelaysSIGQUIT(t *testing.T) {
	d := startDaemon(t, "sleep")
	_ = d.cmd.Process.Signal(syscall.SIGQUIT)
	if code := d.exit(t); code != codeFailure {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, codeFailure, d.stderr.String())
	}
	stderr := d.stderr.String()
	if !strings.Contains(stderr, "goroutine ") || !strings.Contains(stderr, "stopped on SIGQUIT, as asked") || strings.Contains(stderr, "internal error") {
		t.Fatalf("stderr:\n%s", stderr)
	}
}

// A SIGKILL of relay (the supervisor, which is what an operator or the
// kubelet sees) is a SIGKILL of the daemon: no orphan keeps writing under
// the instance's transactional id.
func TestSupervisorKilledTakesTheDaemon(t *testing.T) {
	d := startDaemon(t, "sleep")
	_ = d.cmd.Process.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for alive(d.child) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon (pid %d) outlived its supervisor's SIGKILL by 30 s", d.child)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = d.exit(t)
}

// RELAY_SUPERVISOR_PID left in an environment (copied from a daemon's
// /proc/<pid>/environ, say) does not make relay a daemon without a
// supervisor: it says so and what to do.
func TestStraySupervisorVariable(t *testing.T) {
	cmd := exec.Command(os.Args[0], "run")
	cmd.Env = append(os.Environ(), envTestDaemon+"=sleep", fmt.Sprintf("%s=%d", envSupervisor, os.Getpid()))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("%v, want exit %d; output:\n%s", err, 2, out)
	}
	if !strings.Contains(string(out), "relay was not started by its supervisor") || !strings.Contains(string(out), "unset "+envSupervisor) {
		t.Fatalf("output does not say what is wrong:\n%s", out)
	}
}

// How the daemon's death by a signal ends relay: a stop asked for and
// met by a daemon too young to take it from the supervisor is a stop; a
// SIGHUP met so starts it again; anything else is a runtime failure.
func TestDaemonKilledBySignal(t *testing.T) {
	diedOf := func(sig string) (*os.ProcessState, error) {
		c := exec.Command("sh", "-c", "kill -"+sig+" $$")
		err := c.Run()
		return c.ProcessState, err
	}
	for _, c := range []struct {
		s         supervision
		sig       string
		code      int
		again     bool
		saysWhich string
	}{
		{supervision{stop: true}, "TERM", codeOK, false, "stopped by SIGTERM before the daemon started"},
		{supervision{stop: true}, "INT", codeOK, false, "stopped by SIGINT"},
		{supervision{hup: true}, "HUP", 0, true, "starting it again"},
		{supervision{}, "TERM", codeFailure, false, "killed by SIGTERM"},
		{supervision{hup: true, stop: true}, "HUP", codeFailure, false, "killed by SIGHUP"},
		{supervision{stop: true}, "KILL", codeFailure, false, "killed by SIGKILL"},
	} {
		var stderr bytes.Buffer
		c.s.stderr = &stderr
		state, err := diedOf(c.sig)
		code, again := c.s.ended(state, err, nil, "")
		if code != c.code || again != c.again || !strings.Contains(stderr.String(), c.saysWhich) {
			t.Errorf("%+v, died of SIG%s: exit %d, again %v, %q; want %d, %v, %q",
				c.s, c.sig, code, again, stderr.String(), c.code, c.again, c.saysWhich)
		}
	}
}

// alive: pid is a process that has not ended (a zombie has).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(after, "Z") && !strings.HasPrefix(after, "X")
}

// The reason of each kind of runtime crash report: a panic's first line, a
// fatal error's line from stderr (it is not in the crash report, and the
// runtime writes it in pieces, before a report of any length), a signal's.
func TestCrashReason(t *testing.T) {
	huge := strings.Repeat("goroutine 9 [select]:\nmain.f()\n\t/src/f.go:1 +0x1\n\n", 20000) // ~1 MB: every goroutine
	for _, c := range []struct {
		report string
		stderr []string
		want   string
	}{
		{"panic: boom\n\ngoroutine 7 [running]:\n", nil, "panic: boom"},
		{"goroutine 1 [running]:\nruntime.throw()\n", []string{`{"level":"INFO"}` + "\n", "fatal error: ", "concurrent map writes", "\n", "\ngoroutine 1 [running]:\n", huge}, "fatal error: concurrent map writes"},
		{"SIGSEGV: segmentation violation\nPC=0x0 m=3 sigcode=1\n", nil, "SIGSEGV: segmentation violation"},
		{"goroutine 1 [running]:\n", []string{"no reason here\n", `{"msg":"panic: inside a log line"}` + "\n"}, "a Go runtime crash (its report is above)"},
	} {
		lines := &crashLines{out: io.Discard}
		for _, w := range c.stderr {
			_, _ = lines.Write([]byte(w))
		}
		if got := crashReason([]byte(c.report), lines.reason()); got != c.want {
			t.Errorf("crashReason(%.40q, %q) = %q, want %q", c.report, lines.reason(), got, c.want)
		}
	}
}
