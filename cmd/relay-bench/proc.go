package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// What the subprocess modes share: the group's committed offsets, and
// what /proc says of a process.

// process is a passthrough running as a child process; runMode samples its
// CPU time.
type process interface {
	pid() int
}

// groupCaughtUp: t's group has committed (stable offsets) the source's
// end offsets, so every backlog record is in a committed transaction.
//
// The group's own consumer asks, not the admin client: librdkafka 2.11's
// admin client dies of a segmentation fault when the broker answers an
// offset fetch with NOT_COORDINATOR (see integration's committed).
func (b *bench) groupCaughtUp(ctx context.Context, t topics) (bool, error) {
	got, err := b.groupCommitted(ctx, t)
	if got == nil || err != nil {
		return false, err
	}
	for p, end := range t.end {
		if got[p] < end { // past it: under a steady load (-scale)
			return false, nil
		}
	}
	return true, nil
}

// groupCommitted is t.group's committed offset of each partition of t.end;
// nil when the group coordinator could not say it for all of them now
// (transient: ask again). The offsets are those of committed transactions
// only, whatever the isolation level: a read_uncommitted fetch is answered
// at once with them, where a read_committed one (KIP-447's stable offsets)
// waits while a transaction holds offsets of the group, which under
// relay's steady load over many partitions is nearly always, and would
// add that wait to what is measured.
func (b *bench) groupCommitted(ctx context.Context, t topics) (map[int32]int64, error) {
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	c, ok := b.offsets[t.group]
	if !ok {
		var err error
		c, err = kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": b.o.bootstrap, "group.id": t.group,
			"enable.auto.commit": false, "isolation.level": "read_uncommitted"})
		if err != nil {
			return nil, err
		}
		b.offsets[t.group] = c
	}
	src := t.src
	tps := make([]kafka.TopicPartition, 0, len(t.end))
	for p := range t.end {
		tps = append(tps, kafka.TopicPartition{Topic: &src, Partition: p})
	}
	wait := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		wait = max(min(wait, time.Until(d)), time.Millisecond)
	}
	res, err := c.Committed(tps, int(wait/time.Millisecond))
	if err != nil || len(res) != len(t.end) {
		// Transient (e.g. coordinator loading): ask again.
		return nil, nil //nolint:nilerr // asked again by the caller
	}
	out := make(map[int32]int64, len(res))
	for _, tp := range res {
		if tp.Error != nil {
			return nil, nil //nolint:nilerr // a partition's error is transient too: asked again by the caller
		}
		out[tp.Partition] = int64(tp.Offset)
	}
	return out, nil
}

// procStatus reads one "Name:   123 kB" field of /proc/<pid>/status, in KiB.
func procStatus(pid, field string) (int64, error) {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%s/status", field, pid)
}

// vmHWM reads a process's peak resident set size in KiB.
func vmHWM(pid int) (int64, error) { return procStatus(strconv.Itoa(pid), "VmHWM") }

// vmRSS reads a process's resident set size in KiB.
func vmRSS(pid int) (int64, error) { return procStatus(strconv.Itoa(pid), "VmRSS") }

// children lists the processes pid started (of any of its threads).
func children(pid int) []int {
	var out []int
	threads, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, th := range threads {
		b, _ := os.ReadFile(th)
		for _, field := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(field); err == nil {
				out = append(out, child)
			}
		}
	}
	return out
}

// relayCPU is the CPU time of relay's processes: pid, and the daemon it
// started (`relay run` is a supervisor and the daemon it runs; a JVM has
// no such child). A child that ended in between is left out.
func relayCPU(pid int) (time.Duration, error) {
	total, err := cpuTime(pid)
	for _, c := range children(pid) {
		if v, err := cpuTime(c); err == nil {
			total += v
		}
	}
	return total, err
}

// relayMemory is field (VmHWM, VmRSS) of relay's daemon process plus the
// supervisor's private memory (RssAnon). The supervisor's file pages are
// the binary's, shared with the daemon and counted there once, as the
// container's memory accounting counts them.
func relayMemory(pid int, field string) (int64, error) {
	kids := children(pid)
	if len(kids) == 0 {
		return 0, fmt.Errorf("relay (pid %d) has no daemon process to measure", pid)
	}
	total, err := procStatus(strconv.Itoa(pid), "RssAnon")
	if err != nil {
		return 0, err
	}
	for _, c := range kids {
		v, err := procStatus(strconv.Itoa(c), field)
		if err != nil {
			return 0, err
		}
		total += v
	}
	return total, nil
}

// memoryParts says what relayMemory adds up, so that a change of relay's
// peak shows where it is: the daemon's peak, its file pages now (the
// binary's, and the page cache's state decides how many are resident:
// most right after a build), and the supervisor's private memory.
func memoryParts(pid int) string {
	kids := children(pid)
	if len(kids) == 0 {
		return ""
	}
	d := strconv.Itoa(kids[0])
	hwm, _ := procStatus(d, "VmHWM")
	file, _ := procStatus(d, "RssFile")
	sup, _ := procStatus(strconv.Itoa(pid), "RssAnon")
	return fmt.Sprintf("daemon peak %.1f MiB (file pages now %.1f), supervisor private %.1f MiB", float64(hwm)/1024, float64(file)/1024, float64(sup)/1024)
}

// resetSelfHWM makes this process's VmHWM its current RSS (Linux >= 4.0),
// so the peak of one in-process mode can be read on its own.
func resetSelfHWM() error { return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// cpuTime reads a process's user + system CPU time (its threads included,
// its children not) from /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count from after it.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}

// lineWriter passes whole lines of what is written to it to each, and
// everything to tail.
type lineWriter struct {
	mu      sync.Mutex
	tail    *tailBuffer
	partial []byte
	each    func(line string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	_, _ = w.tail.Write(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.each(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) > 64<<10 {
		w.partial = w.partial[:0]
	}
	return len(p), nil
}
