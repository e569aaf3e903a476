package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

type result struct {
	label   string
	records int
	wall    time.Duration // start of the passthrough → backlog done
	startup time.Duration // start of the passthrough → first record in the output
	lat     latStats

	relay bool
	// rssKB is relay's peak RSS (VmHWM); for an in-process baseline,
	// the rise of this process's peak over its RSS at the mode's start
	// (rssDelta).
	rssKB        int64
	rssDelta     bool
	txnCommitted float64
	txnAborted   float64
	commitSum    float64 // seconds spent committing (relay_commit_duration)
	commitCount  float64

	// A passthrough in its own process: user + system CPU time until the
	// first output and until the backlog was through.
	cpuStartup, cpu time.Duration
	ready           time.Duration // (k): start → Kafka Streams in state RUNNING
	jvmFlags        string        // (k): -XX:+PrintCommandLineFlags
}

// cpuPerRecord is the CPU time per backlog record in µs, startup included.
func (r *result) cpuPerRecord() float64 {
	return float64(r.cpu) / float64(time.Microsecond) / float64(r.records)
}

// steadyCPUPerRecord leaves out the CPU time until the first output.
func (r *result) steadyCPUPerRecord() float64 {
	return float64(r.cpu-r.cpuStartup) / float64(time.Microsecond) / float64(r.records)
}

func (r *result) recPerSec() float64 { return float64(r.records) / r.wall.Seconds() }

// steady excludes startup: records over (done − first output).
func (r *result) steady() float64 {
	d := r.wall - r.startup
	if d <= 0 {
		return 0
	}
	return float64(r.records) / d.Seconds()
}

func printMachine(o options) {
	_, lib := kafka.LibraryVersion()
	fmt.Println("relay-bench")
	fmt.Printf("  machine:    nproc=%d  cpu=%q  kernel=%s  mem=%s\n", runtime.NumCPU(), cpuModel(), kernel(), memTotal())
	fmt.Printf("  toolchain:  %s %s/%s  librdkafka %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, lib)
	fmt.Printf("  workload:   records=%d size=%dB partitions=%d replication=%d latency=%d rec/s x %ds  broker=%s relay=%s\n",
		o.records, o.size, o.partitions, o.rf, o.latRate, o.latSeconds, o.bootstrap, o.relayBin)
	fmt.Println("  broker, relay and relay-bench share this machine's CPUs")
}

func printReport(o options, rs []*result) {
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "mode\trecords\twall s\tstartup s\trec/s\tMB/s\tsteady rec/s\tlat p50\tlat p99\tlat max\tpeak RSS\tCPU µs/rec\ttxn committed\ttxn aborted\tavg commit\t")
	for _, r := range rs {
		rss, cpu, tc, ta, ac := "-", "-", "-", "-", "-"
		if r.relay && r.commitCount > 0 {
			ac = ms(time.Duration(r.commitSum / r.commitCount * float64(time.Second)))
		}
		if r.rssKB > 0 {
			rss = fmt.Sprintf("%.1f MiB", float64(r.rssKB)/1024)
		}
		if r.rssDelta {
			rss = fmt.Sprintf("+%.1f MiB", float64(r.rssKB)/1024)
		}
		if r.cpu > 0 {
			cpu = fmt.Sprintf("%.1f", r.cpuPerRecord())
		}
		if r.relay {
			tc, ta = fmt.Sprintf("%.0f", r.txnCommitted), fmt.Sprintf("%.0f", r.txnAborted)
		}
		fmt.Fprintf(w, "%s\t%d\t%.2f\t%.2f\t%.0f\t%.1f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.label, r.records, r.wall.Seconds(), r.startup.Seconds(), r.recPerSec(),
			r.recPerSec()*float64(o.size)/1e6, r.steady(),
			ms(r.lat.p50), ms(r.lat.p99), ms(r.lat.max), rss, cpu, tc, ta, ac)
	}
	_ = w.Flush()
	fmt.Println()
	fmt.Println("rec/s and MB/s: backlog / wall (from starting the passthrough, startup included; MB = 1e6 value bytes).")
	fmt.Println("steady rec/s: backlog / (wall - startup), startup = until the first record is in the output.")
	fmt.Println("avg commit: relay_commit_duration sum/count (send offsets + commit, per transaction, whole run).")
	fmt.Println("peak RSS: VmHWM of the passthrough's process before it is stopped; +X for the in-process baselines: this process's peak during the mode above its RSS at the start.")
	fmt.Println("CPU µs/rec: the passthrough process's user + system CPU (/proc/<pid>/stat) until the backlog was through, per backlog record; in-process modes: this process's CPU during the phase (the passthrough and its own offset checks).")
	fmt.Printf("latency: %d rec/s for %ds, receive time - CreateTime at a read_committed reader.\n", o.latRate, o.latSeconds)
	printRatios(rs)
}

// mode is the last result of the mode named name ("(b)"), or nil.
func mode(rs []*result, name string) *result {
	var found *result
	for _, r := range rs {
		if short(r.label) == name {
			found = r
		}
	}
	return found
}

func short(label string) string {
	if i := strings.Index(label, " "); i > 0 {
		return label[:i]
	}
	return label
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func kernel() string {
	data, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(data))
}

func memTotal() string {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "?"
}

// printCPU sets relay's CPU per record in (b) against the baseline's (a):
// what relay adds per record over a passthrough without transactions.
func printCPU(rs []*result) {
	a, b := mode(rs, "(a)"), mode(rs, "(b)")
	if a != nil && b != nil && a.cpu > 0 && b.cpu > 0 {
		fmt.Printf("CPU per record (b) / (a) = %.2f  (%.1f against %.1f µs)  target <= 1.5\n", b.cpuPerRecord()/a.cpuPerRecord(), b.cpuPerRecord(), a.cpuPerRecord())
	}
}

// printHooked sets the hook modes, (e) and (f) at each pause of the hook,
// against admission alone (d): what the hook costs when relay calls it for
// several records at once. (e)'s p99 may exceed (d)'s by its 1 s tier.
func printHooked(rs []*result) {
	d := mode(rs, "(d)")
	if d == nil {
		return
	}
	for _, r := range rs {
		if l := short(r.label); l == "(e)" || l == "(f)" {
			fmt.Printf("throughput ratio %s / (d) = %.3f  (steady: %.3f)  p99 %s against (d)'s %s  target >= 0.80  [%s]\n",
				l, r.recPerSec()/d.recPerSec(), r.steady()/d.steady(), ms(r.lat.p99), ms(d.lat.p99), r.label)
		}
	}
}

// printRatios sets every mode against the first (the ceiling) and the
// transactional modes against the idempotent baseline, all of this run.
func printRatios(rs []*result) {
	if len(rs) >= 2 {
		a := rs[0]
		fmt.Println()
		for _, b := range rs[1:] {
			target := "target >= 0.90"
			if short(b.label) == "(k)" {
				target = "Kafka Streams against the same ceiling"
			}
			fmt.Printf("throughput ratio %s / %s = %.3f  (steady: %.3f)  %s\n",
				short(b.label), short(a.label), b.recPerSec()/a.recPerSec(), b.steady()/a.steady(), target)
		}
		// Against the idempotent baseline: what transactions cost on top
		// of the idempotent producer they require.
		if len(rs) >= 3 && short(rs[1].label) == "(i)" {
			for _, b := range rs[2:] {
				if short(b.label) == "(k)" {
					continue
				}
				fmt.Printf("throughput ratio %s / (i) = %.3f  (steady: %.3f)  cost of transactions alone\n",
					short(b.label), b.recPerSec()/rs[1].recPerSec(), b.steady()/rs[1].steady())
			}
		}
		// Tracing on against the same relay with tracing off (b).
		for _, t := range rs {
			if l := short(t.label); l == "(t1)" || l == "(t01)" {
				for _, b := range rs {
					if short(b.label) == "(b)" {
						fmt.Printf("throughput ratio %s / (b) = %.3f  (steady: %.3f)  cost of tracing; target >= %s\n",
							l, t.recPerSec()/b.recPerSec(), t.steady()/b.steady(), map[string]string{"(t1)": "0.70", "(t01)": "0.90"}[l])
					}
				}
			}
		}
		printCPU(rs)
		printHooked(rs)
		printPeers(rs)
		fmt.Println("same-run ratio: both modes ran back to back in this process, on this machine and broker;")
		fmt.Println("compare ratios across machines, not absolute numbers.")
	}
}
