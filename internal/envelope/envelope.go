package envelope

import (
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"
)

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// AnyHeader is a header type with Header's fields, such as the
// transaction loop's own (txn.Header). The functions that read, filter or
// add headers take slices of any of them, so a record's headers are read
// where they are, not copied into envelope's type; a value converts to and
// from Header as it is, at no cost.
type AnyHeader interface {
	~struct {
		Key   string
		Value []byte
	}
}

// Append appends src to dst, a slice of another header type.
func Append[H AnyHeader](dst []H, src []Header) []H {
	for _, h := range src {
		dst = append(dst, H(h))
	}
	return dst
}

// Failure is the failure envelope of one record: where it came from, how
// often and since when it failed, and why.
type Failure struct {
	ID              string // relay.failure.id: topic/partition/offset of the first appearance
	SourceTopic     string
	SourcePartition int32
	SourceOffset    int64
	SourceTimestamp time.Time
	// Fingerprint is relay.source.fingerprint: the source record's
	// (Fingerprint); empty on records written before relay kept it.
	Fingerprint   string
	ConsumerGroup string
	Attempt       int
	FirstFailedAt time.Time
	LastFailedAt  time.Time
	NotBefore     time.Time // zero unless the record waits in a tier
	Class         string
	Code          string
	Message       string // redacted and bounded by the writer
	SchemaID      int    // 0 when unknown
	SchemaSubject string
	SchemaVersion int // 0 when unknown
	ReplayID      string
	ReplayCount   int
	// RecordTimestamp is, on a tier record, the timestamp the record had
	// when it entered relay (the source's, or the replay's): its output,
	// quarantine or rejected record keeps it. The tier record itself has
	// the hop's time, so the tier's retention counts from the hop.
	RecordTimestamp time.Time
	// KeyHead is relay.key.head: on a KEY_BLOCKED record, the failure id
	// of the record it waits behind (FirstFailedAt is then when it began
	// to wait behind it).
	KeyHead string
	// Causes is the failure's cause chain, outermost first, each redacted
	// like Message. It is no relay header: Kafka Connect's stack trace
	// header carries it (see Compat), on the record it failed at.
	Causes []string
}

// TimeFormat is the format of every time header: UTC, RFC 3339, millis.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Headers returns the envelope as relay.* headers. Empty optional fields
// are left out.
func (f *Failure) Headers() []Header { return AppendFailure(make([]Header, 0, 21), f) }

// AppendFailure appends the envelope f as relay.* headers to dst (see
// Headers).
func AppendFailure[H AnyHeader](h []H, f *Failure) []H {
	add := func(k, v string) { h = append(h, H(Header{Key: k, Value: []byte(v)})) }
	add(FailureID, f.ID)
	add(SourceTopic, f.SourceTopic)
	add(SourcePartition, strconv.Itoa(int(f.SourcePartition)))
	add(SourceOffset, strconv.FormatInt(f.SourceOffset, 10))
	if !f.SourceTimestamp.IsZero() {
		add(SourceTimestamp, formatTime(f.SourceTimestamp))
	}
	if f.Fingerprint != "" {
		add(SourceFingerprint, f.Fingerprint)
	}
	add(ConsumerGroup, f.ConsumerGroup)
	add(Attempt, strconv.Itoa(f.Attempt))
	add(FirstFailedAt, formatTime(f.FirstFailedAt))
	add(LastFailedAt, formatTime(f.LastFailedAt))
	if !f.NotBefore.IsZero() {
		add(NotBefore, formatTime(f.NotBefore))
	}
	add(ErrorClass, f.Class)
	add(ErrorCode, f.Code)
	if f.Message != "" {
		add(ErrorMessage, f.Message)
	}
	if f.SchemaID > 0 {
		add(SchemaID, strconv.Itoa(f.SchemaID))
	}
	if f.SchemaSubject != "" {
		add(SchemaSubject, f.SchemaSubject)
	}
	if f.SchemaVersion > 0 {
		add(SchemaVersion, strconv.Itoa(f.SchemaVersion))
	}
	if f.ReplayID != "" {
		add(ReplayID, f.ReplayID)
	}
	if f.ReplayCount > 0 {
		add(ReplayCount, strconv.Itoa(f.ReplayCount))
	}
	if !f.RecordTimestamp.IsZero() {
		add(RecordTimestamp, formatTime(f.RecordTimestamp))
	}
	if f.KeyHead != "" {
		add(KeyHead, f.KeyHead)
	}
	return h
}

// ErrNoEnvelope says the headers carry no failure envelope.
var ErrNoEnvelope = errors.New("no failure envelope")

// Parse reads the envelope from headers. Without relay.failure.id it
// returns ErrNoEnvelope; a header that is present but unreadable is an
// error naming it. Parse never panics, whatever the bytes (fuzzed).
func Parse[H AnyHeader](headers []H) (*Failure, error) {
	f := &Failure{}
	var errs []error
	found := false
	for _, x := range headers {
		h := Header(x)
		if !strings.HasPrefix(h.Key, Prefix) {
			continue
		}
		v := string(h.Value)
		if h.Key == FailureID {
			found = true
		}
		err := f.set(h.Key, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("header %s: %q: %w", h.Key, truncate(v, 64), err))
		}
	}
	if !found {
		return nil, ErrNoEnvelope
	}
	if len(errs) > 0 {
		return f, errors.Join(errs...)
	}
	return f, nil
}

// set reads the envelope header key, valued v, into f.
func (f *Failure) set(key, v string) error {
	var err error
	switch key {
	case FailureID:
		f.ID = v
	case SourceTopic:
		f.SourceTopic = v
	case SourcePartition:
		var n int64
		n, err = strconv.ParseInt(v, 10, 32)
		f.SourcePartition = int32(n)
	case SourceOffset:
		f.SourceOffset, err = strconv.ParseInt(v, 10, 64)
	case SourceTimestamp:
		f.SourceTimestamp, err = parseTime(v)
	case SourceFingerprint:
		f.Fingerprint = v
	case ConsumerGroup:
		f.ConsumerGroup = v
	case Attempt:
		f.Attempt, err = parseCount(v)
	case FirstFailedAt:
		f.FirstFailedAt, err = parseTime(v)
	case LastFailedAt:
		f.LastFailedAt, err = parseTime(v)
	case NotBefore:
		f.NotBefore, err = parseTime(v)
	case ErrorClass:
		f.Class = v
	case ErrorCode:
		f.Code = v
	case ErrorMessage:
		f.Message = v
	case SchemaID:
		f.SchemaID, err = parseCount(v)
	case SchemaSubject:
		f.SchemaSubject = v
	case SchemaVersion:
		f.SchemaVersion, err = parseCount(v)
	case ReplayID:
		f.ReplayID = v
	case ReplayCount:
		f.ReplayCount, err = parseCount(v)
	case RecordTimestamp:
		f.RecordTimestamp, err = parseTime(v)
	case KeyHead:
		f.KeyHead = v
	}
	return err
}

func parseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

func parseCount(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err == nil && n < 0 {
		err = errors.New("negative")
	}
	return n, err
}

// Strip returns the record's own headers: relay's envelope and trace
// headers, and the compatibility headers relay writes, are left out, so a
// record's next hop does not carry stale copies.
func Strip[H AnyHeader](headers []H) []H { return StripWithRoom(headers, 0) }

// StripWithRoom is Strip with room for n more headers, for a caller that
// adds its own after them.
func StripWithRoom[H AnyHeader](headers []H, n int) []H {
	own := 0
	for _, x := range headers {
		if isOwn(Header(x).Key) {
			own++
		}
	}
	out := make([]H, 0, own+n)
	for _, x := range headers {
		if isOwn(Header(x).Key) {
			out = append(out, x)
		}
	}
	return out
}

// isOwn reports whether a header named k is the record's own, not one
// relay writes.
func isOwn(k string) bool {
	return !strings.HasPrefix(k, Prefix) && k != TraceParent && k != TraceState &&
		!strings.HasPrefix(k, springPrefix) && !strings.HasPrefix(k, connectPrefix)
}

// All yields the key and value of each of headers, in order.
func All[H AnyHeader](headers []H) iter.Seq2[string, []byte] {
	return func(yield func(string, []byte) bool) {
		for _, x := range headers {
			if h := Header(x); !yield(h.Key, h.Value) {
				return
			}
		}
	}
}

// Lookup returns the value of the last header named key.
func Lookup[H AnyHeader](headers []H, key string) ([]byte, bool) {
	for i := len(headers) - 1; i >= 0; i-- {
		if h := Header(headers[i]); h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}
