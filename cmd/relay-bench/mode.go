package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// runMode runs both phases for one mode on fresh topics.
func (b *bench) runMode(ctx context.Context, m modeSpec) (*result, error) {
	t, err := b.prepare(ctx, m)
	if err != nil {
		return nil, err
	}
	r := &result{label: m.label, records: b.o.records}
	base, err := b.selfRSSBase()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	pt, err := m.start(ctx, t)
	if err != nil {
		return nil, err
	}
	defer pt.kill()

	if err := b.throughput(ctx, t, pt, r, start); err != nil {
		return nil, err
	}

	// Latency: at a fixed rate, on the caught-up passthrough.
	lctx, cancel2 := context.WithTimeout(ctx, time.Duration(b.o.latSeconds)*time.Second+b.o.timeout)
	defer cancel2()
	if r.lat, err = b.latency(lctx, t, pt); err != nil {
		return nil, err
	}
	fmt.Printf("   latency: %d records at %d/s: p50 %s p99 %s max %s\n", r.lat.n, b.o.latRate, ms(r.lat.p50), ms(r.lat.p99), ms(r.lat.max))

	if err := pt.finish(ctx, r); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if _, ok := pt.(process); !ok {
		peak, err := vmHWM(os.Getpid())
		if err != nil {
			return nil, err
		}
		r.rssKB, r.rssDelta = peak-base, true
	}
	return r, nil
}

// prepare creates m's topics and preloads the backlog into its source.
func (b *bench) prepare(ctx context.Context, m modeSpec) (topics, error) {
	t := topics{src: fmt.Sprintf("bench-%s-%s", b.runID, m.name), value: b.value}
	if m.value != nil {
		v, err := m.value()
		if err != nil {
			return t, err
		}
		t.value = v
	}
	t.out = t.src + ".valid"
	t.group = t.src + "-grp"
	b.groups = append(b.groups, t.group)
	if err := b.createTopics(ctx, t.src, t.out); err != nil {
		return t, err
	}
	pre := time.Now()
	if err := b.preload(ctx, t); err != nil {
		return t, err
	}
	var err error
	if t.end, err = b.watermarks(t.src); err != nil {
		return t, err
	}
	if got := sum(t.end); got != int64(b.o.records) {
		return t, fmt.Errorf("preload: source holds %d records, want %d", got, b.o.records)
	}
	fmt.Printf("   preloaded %d x %d B into %s in %.1fs\n", b.o.records, b.o.size, t.src, time.Since(pre).Seconds())
	return t, nil
}

// throughput waits, from start, until pt has the whole backlog through, and
// fills in r's wall and startup times, and for a process its CPU times.
func (b *bench) throughput(ctx context.Context, t topics, pt passthrough, r *result, start time.Time) error {
	pctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	proc, _ := pt.(process)
	// An in-process passthrough's CPU is this process's during the phase:
	// the passthrough's, and the little this loop spends reading offsets.
	self, _ := cpuTime(os.Getpid())
	for {
		if r.startup == 0 {
			wm, err := b.watermarks(t.out)
			if err != nil {
				return err
			}
			if sum(wm) > 0 {
				r.startup = time.Since(start)
				if proc != nil {
					r.cpuStartup, _ = relayCPU(proc.pid())
				}
			}
		}
		ok, err := pt.caughtUp(pctx)
		if err != nil {
			return err
		}
		if ok {
			r.wall = time.Since(start)
			break
		}
		if err := pt.check(); err != nil {
			return err
		}
		if err := sleep(pctx, 10*time.Millisecond); err != nil {
			return fmt.Errorf("throughput phase: not caught up: %w", err)
		}
	}
	if proc != nil {
		var err error
		if r.cpu, err = relayCPU(proc.pid()); err != nil {
			return err
		}
	} else if now, err := cpuTime(os.Getpid()); err == nil && self > 0 {
		r.cpu = now - self
	}
	if r.startup == 0 || r.startup > r.wall {
		r.startup = r.wall
	}
	cpu := ""
	if r.cpu > 0 {
		cpu = fmt.Sprintf(", CPU %.2fs = %.1fµs/record", r.cpu.Seconds(), r.cpuPerRecord())
	}
	fmt.Printf("   throughput: %d records in %.2fs (first output after %.2fs%s)\n", b.o.records, r.wall.Seconds(), r.startup.Seconds(), cpu)
	return nil
}
