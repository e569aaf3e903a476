package pipeline

import (
	"log/slog"
	"sort"
	"time"
)

// failureLog logs failed records without letting an outage flood the log:
// per error code, the first failureLogBurst lines of each failureLogWindow
// are written; the rest are counted, and said in one line per code when
// the window ends (with the next failure after it). The counts stay exact
// in the metrics; the log shows examples and how many there were.
type failureLog struct {
	start      time.Time
	perCode    map[string]int
	suppressed map[string]int
}

const (
	failureLogWindow = 10 * time.Second
	failureLogBurst  = 5
)

// allow reports whether a failure with code may be logged at now, and
// first says what the window before now suppressed.
func (f *failureLog) allow(log *slog.Logger, code string, now time.Time) bool {
	if f.perCode == nil || now.Sub(f.start) >= failureLogWindow || now.Before(f.start) {
		f.summarise(log)
		f.start, f.perCode, f.suppressed = now, map[string]int{}, map[string]int{}
	}
	f.perCode[code]++
	if f.perCode[code] <= failureLogBurst {
		return true
	}
	f.suppressed[code]++
	return false
}

// summarise says how many failures of each code were not logged.
func (f *failureLog) summarise(log *slog.Logger) {
	codes := make([]string, 0, len(f.suppressed))
	for code := range f.suppressed {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	for _, code := range codes {
		log.Info("record failures not logged one by one", "code", code, "suppressed", f.suppressed[code],
			"logged", failureLogBurst, "window", failureLogWindow.String(), "since", f.start)
	}
}

// traceAttrs are the log attributes that find p's trace: its process
// span's trace and span ids, when it has a span.
func (p *pass) traceAttrs() []any {
	if p.span == nil {
		return nil
	}
	sc := p.span.SpanContext()
	if !sc.IsValid() {
		return nil
	}
	return []any{"trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String()}
}
