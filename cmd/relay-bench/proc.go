package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

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

// resetSelfHWM makes this process's VmHWM its current RSS (Linux >= 4.0),
// so the peak of one in-process mode can be read on its own.
func resetSelfHWM() error { return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuSeconds reads a process's user + system CPU time.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Fields after the command (which may hold spaces) start at state.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	return float64(utime+stime) / clockTicks, nil
}
