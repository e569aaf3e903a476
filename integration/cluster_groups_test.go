package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"relay/internal/config"
	"relay/internal/kafkaclient"
)

// childDescribe, set in a child process of this test, makes it the
// process that describes the group while its coordinator is away.
const childDescribe = "RELAY_TEST_DESCRIBE_CHILD"

// Seen in the rolling restart: a group description that timed out while
// the group coordinator was down aborted the process when a coordinator
// was found again (librdkafka's "rd_kafka_enq_once_del_source_return:
// Assertion `eonce->refcnt > 0' failed"; see kafkaclient.Groups). A child
// process, started first, describes the group right after its coordinator
// is killed, and lives on while the coordinator moves or comes back and a
// while after; it must then exit 0. With librdkafka's request timeout at
// 3 s the timed-out requests are gone from the client long before, so a
// client kept open past its call (a mutation) aborts the child. At least
// one look must have failed, or the test proved nothing.
func TestClusterGroupDescribeOutlivesItsCoordinator(t *testing.T) {
	if group := os.Getenv(childDescribe); group != "" {
		describeWhileAway(t, group)
		return
	}
	needCluster(t)
	group := uniq(t, "grp")
	cfg := describeConfig(t, group)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kafkaclient.GroupsOf(cfg).DescribeConsumerGroups(ctx, []string{group})
	if err != nil || len(res.ConsumerGroupDescriptions) != 1 {
		t.Fatalf("describe %s: %v %v", group, res, err)
	}
	node := fmt.Sprint(res.ConsumerGroupDescriptions[0].Coordinator.ID)

	c := startDescriber(t, group)
	c.expect(t, "ready")
	cluster(t, "kill-node", node)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			cluster(t, "start-node", node)
		}
	})
	c.say(t, "go")
	line := c.expect(t, "described while away")
	var failed int
	if _, err := fmt.Sscanf(line, "described while away: %d of 10 looks failed", &failed); err != nil || failed == 0 {
		t.Fatalf("%q: no look failed while the coordinator was away, so the test proved nothing", line)
	}
	// A coordinator is found again (moved, or back): the child's client
	// would now answer what timed out. Give it time to.
	cluster(t, "start-node", node)
	restarted = true
	time.Sleep(5 * time.Second)
	if err := c.end(t); err != nil {
		t.Fatalf("the child that described the group while its coordinator was away ended with %v:\n%s", err, c.output())
	}
	t.Logf("%d of 10 looks failed while the coordinator was away; the child exited 0", failed)
}

// describer is the child process of the test, as its parent sees it.
type describer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	read  sync.WaitGroup
	mu    sync.Mutex
	out   strings.Builder // stdout and stderr, for a failure's message
}

func (d *describer) Write(b []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.Write(b)
}

func (d *describer) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

// startDescriber starts the test binary again as the child.
func startDescriber(t *testing.T, group string) *describer {
	t.Helper()
	d := &describer{lines: make(chan string, 16)}
	d.cmd = exec.Command(os.Args[0], "-test.run=^TestClusterGroupDescribeOutlivesItsCoordinator$", "-test.v")
	d.cmd.Env = append(os.Environ(), childDescribe+"="+group)
	d.cmd.Stderr = d
	var err error
	if d.stdin, err = d.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.cmd.Process.Kill() })
	d.read.Add(1)
	go func() {
		defer d.read.Done()
		defer close(d.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = d.Write([]byte(sc.Text() + "\n"))
			d.lines <- sc.Text()
		}
	}()
	return d
}

// expect waits up to a minute for a line of the child's holding want.
func (d *describer) expect(t *testing.T, want string) string {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case line, ok := <-d.lines:
			if !ok {
				t.Fatalf("the child ended before saying %q:\n%s", want, d.output())
			}
			if strings.Contains(line, want) {
				return line
			}
		case <-deadline:
			t.Fatalf("the child did not say %q within a minute:\n%s", want, d.output())
		}
	}
}

func (d *describer) say(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(d.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// end closes the child's stdin, which ends it, and waits for it.
func (d *describer) end(t *testing.T) error {
	t.Helper()
	_ = d.stdin.Close()
	done := make(chan struct{})
	go func() {
		for range d.lines { //nolint:revive // drained, as Wait wants
		}
		d.read.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("the child did not end within a minute:\n%s", d.output())
	}
	err := d.cmd.Wait()
	if err == nil && strings.Contains(d.output(), "Assertion") {
		err = fmt.Errorf("an assertion failed")
	}
	return err
}

// describeConfig is relay's configuration for the cluster and group, with
// librdkafka's request timeout cut to 3 s.
func describeConfig(t *testing.T, group string) *config.Config {
	t.Helper()
	env := map[string]string{"RELAY_KAFKA_BOOTSTRAP_SERVERS": bootstrap, "RELAY_SOURCE_TOPICS": "unused", "RELAY_GROUP_ID": group,
		"RELAY_KAFKA_SOCKET_TIMEOUT_MS": "3000"}
	return operatorConfig(t, env)
}

// describeWhileAway is the child: it says "ready", waits for "go", makes
// ten looks of 300 ms each (the coordinator was killed meanwhile), says
// how many failed, and waits until its stdin ends.
func describeWhileAway(t *testing.T, group string) {
	g := kafkaclient.GroupsOf(describeConfig(t, group))
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return
	}
	failed := 0
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		if _, err := g.DescribeConsumerGroups(ctx, []string{group}); err != nil {
			failed++
		}
		cancel()
	}
	fmt.Printf("described while away: %d of 10 looks failed\n", failed)
	for in.Scan() {
	}
}
