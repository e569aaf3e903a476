package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"relay/internal/tiers"
)

// Reader is the canonical version every accepted record is upcast to,
// compiled at start-up.
type Reader struct {
	ID     int
	Format Format
	schema *compiled
	// Protobuf: the canonical message (the schema's first message) and
	// the framing of its index.
	msg      protoreflect.MessageDescriptor
	index    []byte
	required bool // the canonical message's tree declares required fields
}

func newReader(id int, c *compiled) (*Reader, error) {
	r := &Reader{ID: id, Format: c.format, schema: c}
	switch c.format {
	case FormatAvro:
		if c.avro.Type() != avro.Record {
			return nil, fmt.Errorf("it is an Avro %s, relay needs a record", c.avro.Type())
		}
	case FormatProtobuf:
		r.msg = c.proto.Messages().Get(0)
		r.index = AppendIndexes(nil, firstMessage)
		r.required = hasRequired(r.msg, map[protoreflect.FullName]bool{})
	}
	return r, nil
}

// readable says whether records of the writer schema c can be read as
// the canonical version, and keeps in w what reading them needs: Avro by
// schema resolution, Protobuf by field number (the writer must declare
// the canonical message, by its full name), JSON Schema by validating each
// record against both schemas (checked per record).
func (r *Reader) readable(c *compiled, w *writer) error {
	switch r.Format {
	case FormatAvro:
		res, err := avro.NewSchemaCompatibility().Resolve(r.schema.avro, c.avro)
		w.resolved, w.avroWriter = res, c.avro
		return err
	case FormatProtobuf:
		w.file = c.proto
		w.msg = findMessage(c.proto.Messages(), r.msg.FullName())
		if w.msg == nil {
			return fmt.Errorf("it declares no message %s", r.msg.FullName())
		}
		w.required = hasRequired(w.msg, map[protoreflect.FullName]bool{})
		w.subset = !r.required && protoSubset(w.msg, r.msg, map[[2]protoreflect.FullName]bool{})
		return protoReadable(w.msg, r.msg, map[[2]protoreflect.FullName]bool{})
	case FormatJSON:
		w.json = c.json
	}
	return nil
}

// findMessage is the message named name among msgs and their nested ones.
func findMessage(msgs protoreflect.MessageDescriptors, name protoreflect.FullName) protoreflect.MessageDescriptor {
	for i := range msgs.Len() {
		md := msgs.Get(i)
		if md.FullName() == name {
			return md
		}
		if n := findMessage(md.Messages(), name); n != nil {
			return n
		}
	}
	return nil
}

var protoOut = proto.MarshalOptions{Deterministic: true}

// admitProto reads a Protobuf record: its message-index framing names the
// canonical message in the writer's file; the body must parse as that
// message with no field it does not declare; then it is read as the
// canonical message by field number (fields the canonical version lacks
// are dropped) and written again.
func (a *Admitter) admitProto(out Admitted, w *writer, value, body []byte) (Admitted, error) {
	path, msgBody, err := ParseIndexes(body)
	var md protoreflect.MessageDescriptor
	if err == nil {
		md, err = messageAt(w.file, path)
	}
	if err != nil {
		return out, tiers.Fail(tiers.CauseWireFormat, err)
	}
	if md.FullName() != a.reader.msg.FullName() {
		return out, tiers.Failf(tiers.CauseSchemaUnsupported, "%s version %d: the record is a %s, the canonical message is %s", w.info.Subject, w.info.Version, md.FullName(), a.reader.msg.FullName())
	}
	if w.same || w.subset {
		// The bytes are the canonical message's: one walk checks them
		// and builds the record (and, for a subset, one more that the
		// writer declares every field they hold).
		cm, err := unmarshalProto(protoIn, a.reader.msg, msgBody, a.reader.required)
		if err == nil && !w.same {
			err = declaredBy(cm, md)
		}
		if err == nil {
			out.Record, err = protoRecord(cm, true, len(msgBody))
		}
		if err != nil {
			return out, tiers.Failf(tiers.CausePayloadMalformed, "protobuf body does not parse as %s: %v", md.FullName(), err)
		}
		if w.same {
			out.Value = value
			return out, nil
		}
		out.Value = append(append(AppendWire(make([]byte, 0, len(value)+len(a.reader.index)), a.reader.ID, nil), a.reader.index...), msgBody...)
		return out, nil
	}
	if _, err := decodeProto(md, msgBody, w.required); err != nil {
		return out, tiers.Fail(tiers.CausePayloadMalformed, err)
	}
	cm, err := unmarshalProto(protoUpcast, a.reader.msg, msgBody, a.reader.required)
	if err != nil {
		return out, tiers.Failf(tiers.CauseFieldMissing, "%s version %d cannot be read as version %d: %v", w.info.Subject, w.info.Version, a.set.ReaderVersion, err)
	}
	if out.Record, err = protoRecord(cm, false, len(msgBody)); err != nil {
		return out, tiers.Fail(tiers.CausePayloadMalformed, err)
	}
	if out.Value, err = a.frameProto(cm); err != nil {
		return out, fmt.Errorf("upcast %s v%d to v%d: %w", w.info.Subject, w.info.Version, a.set.ReaderVersion, err)
	}
	return out, nil
}

// frameProto writes m in the wire format of the canonical version.
func (a *Admitter) frameProto(m proto.Message) ([]byte, error) {
	dst := make([]byte, 0, headerSize+len(a.reader.index)+proto.Size(m))
	dst = append(AppendWire(dst, a.reader.ID, nil), a.reader.index...)
	return protoOut.MarshalAppend(dst, m)
}

func (a *Admitter) encodeProto(rec map[string]any) ([]byte, error) {
	m, err := protoFromRecord(a.reader.msg, rec)
	if err != nil {
		return nil, err
	}
	return a.frameProto(m)
}

// admitJSON reads a JSON Schema record: a JSON object that satisfies its
// writer's schema and, when that is not the canonical version, the
// canonical one too. The body is not rewritten: upcast only frames it
// with the canonical id, which it satisfies.
func (a *Admitter) admitJSON(out Admitted, w *writer, value, body []byte) (Admitted, error) {
	obj, err := parseJSON(body)
	if err != nil {
		return out, tiers.Fail(tiers.CausePayloadMalformed, err)
	}
	if err := validate(w.json, obj); err != nil {
		return out, tiers.Failf(tiers.CausePayloadMalformed, "JSON body does not satisfy %s version %d: %s", w.info.Subject, w.info.Version, validationProblem(err))
	}
	if !w.same {
		if err := validate(a.reader.schema.json, obj); err != nil {
			return out, tiers.Failf(tiers.CauseFieldMissing, "%s version %d cannot be read as version %d: %s", w.info.Subject, w.info.Version, a.set.ReaderVersion, validationProblem(err))
		}
	}
	out.Record = jsonRecord(obj) // after validation: it rewrites obj's numbers
	if w.same {
		out.Value = value
		return out, nil
	}
	out.Value = AppendWire(make([]byte, 0, len(value)), a.reader.ID, body)
	return out, nil
}

func (a *Admitter) encodeJSON(rec map[string]any) ([]byte, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	obj, err := parseJSON(b)
	if err != nil {
		return nil, err
	}
	if err := validate(a.reader.schema.json, obj); err != nil {
		return nil, fmt.Errorf("does not satisfy the canonical version: %s", validationProblem(err))
	}
	return AppendWire(make([]byte, 0, headerSize+len(b)), a.reader.ID, b), nil
}

// CheckAccepted compiles the canonical version and checks every accepted
// version against it at start-up, so a configuration that would
// quarantine a whole version is refused before the first record. Accepted
// versions must be of the canonical version's type; Avro ones must
// resolve to it, Protobuf ones must declare its message with the same
// wire type for each field number they share.
func CheckAccepted(ctx context.Context, c *Client, set Settings) (*Reader, error) {
	readerID, rt, err := c.ByVersion(ctx, set.Subject, set.ReaderVersion)
	if err != nil {
		return nil, fmt.Errorf("reader version %d of subject %s: %w", set.ReaderVersion, set.Subject, err)
	}
	rc, err := compileText(ctx, c, rt)
	if err != nil {
		return nil, fmt.Errorf("reader version %d of subject %s does not compile: %w", set.ReaderVersion, set.Subject, err)
	}
	r, err := newReader(readerID, rc)
	if err != nil {
		return nil, fmt.Errorf("reader version %d of subject %s: %w", set.ReaderVersion, set.Subject, err)
	}
	have, err := c.SubjectVersions(ctx, set.Subject)
	if err != nil {
		return nil, fmt.Errorf("versions of subject %s: %w", set.Subject, err)
	}
	for _, v := range set.Accept.List(have) {
		_, t, err := c.ByVersion(ctx, set.Subject, v)
		if err != nil {
			return nil, fmt.Errorf("version %d of subject %s: %w", v, set.Subject, err)
		}
		if t.Format != r.Format {
			return nil, fmt.Errorf("accepted version %d of subject %s is a %s schema, the reader version %d is %s", v, set.Subject, t.Format, set.ReaderVersion, r.Format)
		}
		wc, err := compileText(ctx, c, t)
		var ce *compileError
		if err != nil && !errors.As(err, &ce) {
			return nil, fmt.Errorf("version %d of subject %s: %w", v, set.Subject, err)
		}
		if err == nil {
			err = r.readable(wc, &writer{})
		}
		if err != nil {
			return nil, fmt.Errorf("accepted version %d of subject %s cannot be read as reader version %d: %w", v, set.Subject, set.ReaderVersion, err)
		}
	}
	return r, nil
}
