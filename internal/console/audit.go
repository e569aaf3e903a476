package console

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// auditResult is the last `relay audit` of a source, from the file its
// --metrics-file writes.
type auditResult struct {
	Clean bool
	// Incomplete: the last audit could not complete, and gave no verdict.
	Incomplete bool
	At         time.Time
	Findings   map[string]int64
}

// When renders the audit's time.
func (a *auditResult) When() string { return a.At.UTC().Format(time.RFC3339) }

// readAudit reads the audit's Prometheus text file by source; a missing
// file is no audit yet.
func readAudit(path string) (map[string]*auditResult, error) {
	out := map[string]*auditResult{}
	if path == "" {
		return out, nil
	}
	f, err := os.Open(path) //nolint:gosec // the operator names the file
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, labels, value, ok := sample(sc.Text())
		if !ok {
			continue
		}
		src := labels["source"]
		a := out[src]
		if a == nil {
			a = &auditResult{Findings: map[string]int64{}}
			out[src] = a
		}
		switch name {
		case "relay_audit_clean":
			a.Clean = value == 1
		case "relay_audit_timestamp_seconds":
			a.At = time.Unix(int64(value), 0)
		case "relay_audit_findings":
			a.Findings[labels["kind"]] = int64(value)
		case "relay_audit_outcome":
			if labels["outcome"] == "incomplete" {
				a.Incomplete = value == 1
			}
		}
	}
	return out, sc.Err()
}

// sample reads one line of Prometheus text: name{a="b",…} value.
func sample(line string) (name string, labels map[string]string, value float64, ok bool) {
	if line == "" || line[0] == '#' {
		return "", nil, 0, false
	}
	labels = map[string]string{}
	var rest string
	if i := strings.IndexByte(line, '{'); i > 0 {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", nil, 0, false
		}
		name, rest = line[:i], line[j+1:]
		for _, kv := range strings.Split(line[i+1:j], ",") {
			k, v, found := strings.Cut(kv, "=")
			if found {
				if uq, err := strconv.Unquote(strings.TrimSpace(v)); err == nil {
					labels[strings.TrimSpace(k)] = uq
				}
			}
		}
	} else {
		f := strings.Fields(line)
		if len(f) < 2 {
			return "", nil, 0, false
		}
		name, rest = f[0], strings.Join(f[1:], " ")
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	return name, labels, v, err == nil
}
