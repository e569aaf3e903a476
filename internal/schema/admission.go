package schema

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/reflect/protoreflect"

	"relay/internal/tiers"
)

// VersionSet is the set of accepted schema versions (RELAY_SCHEMA_ACCEPT,
// parsed by config).
type VersionSet interface {
	Contains(version int) bool
	// List returns the versions of the set among have, in order.
	List(have []int) []int
	String() string
}

// Settings say what admission accepts.
type Settings struct {
	Subject       string
	Accept        VersionSet
	ReaderVersion int
	// Timeout bounds each registry lookup.
	Timeout time.Duration
	// CacheSize bounds the number of writer schemas kept.
	CacheSize int
}

// Info is what is known of a record's writer schema.
type Info struct {
	ID      int
	Subject string
	Version int
}

// Admitted is an accepted record, upcast to the canonical reader version.
type Admitted struct {
	Writer Info
	// Record is the decoded record in the reader schema's shape.
	Record map[string]any
	// Value is Record framed with the reader schema's id.
	Value []byte
}

// api bounds what garbage can make the decoder allocate.
var api = avro.Config{
	MaxByteSliceSize:  8 << 20,
	MaxSliceAllocSize: 1 << 20,
}.Freeze()

// Admitter checks and upcasts records. It is safe for concurrent use.
type Admitter struct {
	reg    Registry
	set    Settings
	reader *Reader

	mu    sync.Mutex
	cache map[int]*writer
	order []int // insertion order, for eviction
	// lookups are the cold lookups in flight: records of one new id that
	// arrive at once (relay tries several records at once) share one.
	lookups map[int]*lookup
}

// lookup is one cold lookup in flight; done closes when w and err are set.
type lookup struct {
	done chan struct{}
	w    *writer
	err  error
}

// writer is a cached, immutable verdict on one writer schema id.
type writer struct {
	info   Info
	format Format
	same   bool // writer is the reader: the bytes stay as they are
	fail   *tiers.Error
	// Avro: decodes writer bytes into the reader's shape; the writer's own
	// schema, which the bytes follow (counted before decoding).
	resolved, avroWriter avro.Schema
	// Protobuf: the writer's file, and its message of the canonical
	// message's name.
	file     protoreflect.FileDescriptor
	msg      protoreflect.MessageDescriptor
	required bool // msg's tree declares required fields
	subset   bool // msg's records are the canonical message's, byte for byte
	// JSON Schema: the writer's schema, which a body must satisfy.
	json *jsonschema.Schema
}

// Probe asks the registry for the reader's schema, past the cache: while
// the registry refuses relay's credential, this is how relay finds out
// that it is fixed when no record needs a lookup (schemas are cached by
// id, and the records that waited may have moved on). Its answer reaches
// the client's AccessFunc like any other.
func (a *Admitter) Probe(ctx context.Context) error {
	_, err := a.reg.Schema(ctx, a.reader.ID)
	return err
}

// NewAdmitter builds an admitter on the canonical version r, which
// CheckAccepted compiled at start-up.
func NewAdmitter(reg Registry, set Settings, r *Reader) (*Admitter, error) {
	if r == nil || r.schema == nil {
		return nil, errors.New("schema admission needs the canonical version")
	}
	return &Admitter{reg: reg, set: set, reader: r, cache: map[int]*writer{}}, nil
}

// ReaderID is the id outputs are framed with.
func (a *Admitter) ReaderID() int { return a.reader.ID }

// Format is the schema type of the canonical version, and so of every
// accepted record.
func (a *Admitter) Format() Format { return a.reader.Format }

// Admit checks value and upcasts it. A failure is a *tiers.Error; Info is
// filled as far as it is known, for the failure envelope.
func (a *Admitter) Admit(ctx context.Context, value []byte) (Admitted, error) {
	id, body, err := ParseWire(value)
	if err != nil {
		return Admitted{}, tiers.Fail(tiers.CauseWireFormat, err)
	}
	w, err := a.writer(ctx, id)
	if err != nil {
		return Admitted{Writer: Info{ID: id}}, err
	}
	out := Admitted{Writer: w.info}
	if w.fail != nil {
		return out, w.fail
	}
	switch w.format {
	case FormatProtobuf:
		return a.admitProto(out, w, value, body)
	case FormatJSON:
		return a.admitJSON(out, w, value, body)
	}
	rec, err := decode(w.resolved, w.avroWriter, body)
	if err != nil {
		return out, tiers.Fail(tiers.CausePayloadMalformed, err)
	}
	out.Record = rec
	if w.same {
		out.Value = value
		return out, nil
	}
	out.Value, err = a.Encode(rec)
	if err != nil {
		// The resolved schema produced what the reader cannot encode: a
		// bug or a registry inconsistency, not the record's fault.
		return out, fmt.Errorf("upcast %s v%d to v%d: %w", w.info.Subject, w.info.Version, a.set.ReaderVersion, err)
	}
	return out, nil
}

// Encode frames rec, in the reader's shape, with the reader's id. rec may
// come from JSON (numbers as json.Number, bytes as base64 text).
func (a *Admitter) Encode(rec map[string]any) ([]byte, error) {
	switch a.reader.Format {
	case FormatProtobuf:
		return a.encodeProto(rec)
	case FormatJSON:
		return a.encodeJSON(rec)
	}
	s := a.reader.schema.avro
	native, err := fromJSON(s, rec)
	if err != nil {
		return nil, err
	}
	body, err := api.Marshal(s, native)
	if err != nil {
		return nil, err
	}
	return AppendWire(make([]byte, 0, headerSize+len(body)), a.reader.ID, body), nil
}

// decode reads body with s and requires every byte to be used: trailing
// bytes mean the writer schema is not what wrote them.
//
// The items and entries the body claims are counted first, by writer, the
// schema the bytes follow (s may be resolved to another's shape).
func decode(s, writer avro.Schema, body []byte) (map[string]any, error) {
	if err := checkAvroItems(writer, body); err != nil {
		return nil, err
	}
	r := avro.NewReader(nil, 0, avro.WithReaderConfig(api)).Reset(body)
	var rec map[string]any
	r.ReadVal(s, &rec)
	if r.Error != nil {
		if errors.Is(r.Error, io.EOF) || errors.Is(r.Error, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("avro body ends early (%d bytes)", len(body))
		}
		return nil, r.Error
	}
	r.Peek()
	if !errors.Is(r.Error, io.EOF) {
		return nil, errors.New("avro body has bytes after the record")
	}
	return rec, nil
}

// writer returns the cached verdict on id, looking it up if needed.
// Registry failures are not cached: they may heal.
func (a *Admitter) writer(ctx context.Context, id int) (*writer, error) {
	a.mu.Lock()
	w, ok := a.cache[id]
	if ok {
		a.mu.Unlock()
		return w, nil
	}
	if l, ok := a.lookups[id]; ok {
		a.mu.Unlock()
		select {
		case <-l.done:
			if l.err != nil && ctx.Err() == nil && errors.Is(l.err, context.Canceled) {
				// The first caller gave up, this one has not: ask again.
				return a.writer(ctx, id)
			}
			return l.w, l.err
		case <-ctx.Done():
			return nil, registryFailure(id, ctx.Err())
		}
	}
	l := &lookup{done: make(chan struct{})}
	if a.lookups == nil {
		a.lookups = map[int]*lookup{}
	}
	a.lookups[id] = l
	a.mu.Unlock()
	w, err := a.lookup(ctx, id)
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.lookups, id)
	l.w, l.err = w, err
	close(l.done)
	if err != nil {
		return nil, err
	}
	if _, ok := a.cache[id]; !ok {
		for len(a.order) >= a.set.CacheSize {
			delete(a.cache, a.order[0])
			a.order = a.order[1:]
		}
		a.cache[id] = w
		a.order = append(a.order, id)
	}
	return w, nil
}

func (a *Admitter) lookup(ctx context.Context, id int) (w *writer, err error) {
	if parent := trace.SpanFromContext(ctx); parent.IsRecording() {
		// A cold lookup, in a traced record's process span.
		var span trace.Span
		ctx, span = parent.TracerProvider().Tracer("relay/internal/schema").Start(ctx, "registry lookup",
			trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attribute.Int("relay.schema.id", id)))
		defer func() {
			if err != nil {
				// A fixed text: the registry's answer is not redacted here;
				// the process span carries the redacted message.
				span.AddEvent("exception", trace.WithAttributes(attribute.String("exception.type", fmt.Sprintf("%T", err)),
					attribute.String("exception.message", "registry lookup failed")))
				span.SetStatus(codes.Error, "registry lookup failed")
			}
			span.End()
		}()
	}
	lctx, cancel := context.WithTimeout(ctx, a.set.Timeout)
	defer cancel()
	svs, err := a.reg.Versions(lctx, id)
	if err != nil {
		return nil, registryFailure(id, err)
	}
	w = &writer{info: Info{ID: id}}
	for _, sv := range svs {
		if sv.Subject == a.set.Subject {
			w.info.Subject, w.info.Version = sv.Subject, sv.Version
			break
		}
	}
	if w.info.Subject == "" {
		if len(svs) > 0 {
			w.info.Subject, w.info.Version = svs[0].Subject, svs[0].Version
		}
		w.fail = tiers.Failf(tiers.CauseSchemaUnsupported, "schema id %d is registered under %v, not under subject %s", id, svs, a.set.Subject)
		return w, nil
	}
	if !a.set.Accept.Contains(w.info.Version) {
		w.fail = tiers.Failf(tiers.CauseSchemaUnsupported, "%s version %d is not in the accepted versions %s", w.info.Subject, w.info.Version, a.set.Accept)
		return w, nil
	}
	t, err := a.reg.Schema(lctx, id)
	if err != nil {
		return nil, registryFailure(id, err)
	}
	w.format = t.Format
	if t.Format != a.reader.Format {
		w.fail = tiers.Failf(tiers.CauseSchemaUnsupported, "%s version %d (id %d) is a %s schema; the canonical version is %s", w.info.Subject, w.info.Version, id, t.Format, a.reader.Format)
		return w, nil
	}
	if id == a.reader.ID {
		r := a.reader
		w.same = true
		w.resolved, w.avroWriter, w.file, w.msg, w.required = r.schema.avro, r.schema.avro, r.schema.proto, r.msg, r.required
		w.json = r.schema.json
		return w, nil
	}
	c, err := compileText(lctx, a.reg, t)
	var ce *compileError
	if errors.As(err, &ce) {
		w.fail = tiers.Failf(tiers.CauseSchemaUnsupported, "%s version %d (id %d) does not compile as %s: %v", w.info.Subject, w.info.Version, id, t.Format, err)
		return w, nil
	}
	if err != nil {
		return nil, registryFailure(id, err)
	}
	if err := a.reader.readable(c, w); err != nil {
		w.fail = tiers.Failf(tiers.CauseFieldMissing, "%s version %d cannot be read as version %d: %v", w.info.Subject, w.info.Version, a.set.ReaderVersion, err)
	}
	return w, nil
}

func registryFailure(id int, err error) error {
	if errors.Is(err, ErrNotFound) {
		return tiers.Failf(tiers.CauseSchemaNotFound, "schema id %d: %v", id, err)
	}
	var un *UnauthorizedError
	var tlsErr *TLSError
	if errors.As(err, &un) || errors.As(err, &tlsErr) {
		return tiers.Fail(tiers.CauseRegistryUnauthorized, err)
	}
	return tiers.Fail(tiers.CauseRegistryUnavailable, err)
}
