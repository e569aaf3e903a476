package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"relay/internal/config"
	"relay/internal/kafkaclient"
)

// childDescribe, set in a child process of this test, makes it the
// process that describes the group while its coordinator is away.
const childDescribe = "RELAY_TEST_DESCRIBE_CHILD"

// Seen in the rolling restart: a group description that timed out while
// the group coordinator was down aborted the process when the coordinator
// came back (librdkafka's "rd_kafka_enq_once_del_source_return: Assertion
// `eonce->refcnt > 0' failed"; see kafkaclient.Groups). A child process
// describes the group while its coordinator is killed, every look timing
// out, and lives on until the coordinator is back and a while after; it
// must then exit 0. With librdkafka's request timeout at 3 s the timed-out
// requests are gone from the client long before the broker returns, so a
// client kept open past its call (a mutation) aborts the child.
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
	cluster(t, "kill-node", node)
	started := false
	t.Cleanup(func() {
		if !started {
			cluster(t, "start-node", node)
		}
	})

	child := exec.Command(os.Args[0], "-test.run=^TestClusterGroupDescribeOutlivesItsCoordinator$", "-test.v")
	child.Env = append(os.Environ(), childDescribe+"="+group)
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var tail strings.Builder
	child.Stderr = &tail
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	described := false
	for !described && lines.Scan() {
		tail.WriteString(lines.Text() + "\n")
		described = strings.Contains(lines.Text(), "described while away")
	}
	if !described {
		_ = child.Wait()
		t.Fatalf("the child did not describe the group:\n%s", tail.String())
	}
	go func() { _, _ = io.Copy(&tail, stdout) }()

	// The coordinator returns; the child's client would now send what
	// timed out. Give it time to: a few seconds past the broker's start.
	cluster(t, "start-node", node)
	started = true
	time.Sleep(5 * time.Second)
	_ = stdin.Close()
	err = child.Wait()
	if err != nil || strings.Contains(tail.String(), "Assertion") {
		t.Fatalf("the child describing the group while its coordinator was away ended with %v:\n%s", err, tail.String())
	}
}

// describeConfig is relay's configuration for the cluster and group, with
// librdkafka's request timeout cut to 3 s.
func describeConfig(t *testing.T, group string) *config.Config {
	t.Helper()
	env := map[string]string{"RELAY_KAFKA_BOOTSTRAP_SERVERS": bootstrap, "RELAY_SOURCE_TOPICS": "unused", "RELAY_GROUP_ID": group,
		"RELAY_KAFKA_SOCKET_TIMEOUT_MS": "3000"}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(config.ForOperators(func(k string) (string, bool) { v, ok := env[k]; return v, ok }), environ)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// describeWhileAway is the child: looks that time out while the
// coordinator is down, then a wait until the parent closes stdin.
func describeWhileAway(t *testing.T, group string) {
	g := kafkaclient.GroupsOf(describeConfig(t, group))
	timedOut := 0
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		if _, err := g.DescribeConsumerGroups(ctx, []string{group}); err != nil {
			timedOut++
		}
		cancel()
	}
	fmt.Printf("described while away: %d of 10 looks failed\n", timedOut)
	_, _ = io.Copy(io.Discard, os.Stdin)
}
