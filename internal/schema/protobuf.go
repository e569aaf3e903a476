package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// mainFile is the name the compiler knows a registered schema by; its
// imports are its references' names.
const mainFile = "relay-registered-schema.proto"

// compileProto compiles a Protobuf schema and its imports in-process. The
// well-known types (google/protobuf/*.proto) need no reference.
func compileProto(ctx context.Context, t Text, refs *referenced) (*compiled, error) {
	srcs := make(map[string]string, len(refs.texts)+1)
	for n, rt := range refs.texts {
		if rt.Format != FormatProtobuf {
			return nil, fmt.Errorf("import %q is a %s schema, not PROTOBUF", n, rt.Format)
		}
		srcs[n] = rt.Schema
	}
	srcs[mainFile] = t.Schema
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(srcs),
		}),
		// The first error is enough to quarantine; warnings are not ours.
		Reporter: reporter.NewReporter(nil, func(reporter.ErrorWithPos) {}),
	}
	files, err := c.Compile(ctx, mainFile)
	if err != nil {
		return nil, fmt.Errorf("protobuf schema does not compile: %w", err)
	}
	f := files.FindFileByPath(mainFile)
	if f == nil || f.Messages().Len() == 0 {
		return nil, errors.New("protobuf schema declares no message")
	}
	// The compiler's descriptors resolve each field's features (editions)
	// at every call, which costs a third of a record's decoding: rebuilt
	// as the protobuf runtime's own, they answer from fields.
	std, err := standard(f, &protoregistry.Files{})
	if err != nil {
		return nil, fmt.Errorf("protobuf schema: %w", err)
	}
	return &compiled{format: FormatProtobuf, proto: std}, nil
}

// standard rebuilds fd, after its imports, as the protobuf runtime's
// descriptor, registered in reg.
func standard(fd protoreflect.FileDescriptor, reg *protoregistry.Files) (protoreflect.FileDescriptor, error) {
	if have, err := reg.FindFileByPath(fd.Path()); err == nil {
		return have, nil
	}
	imports := fd.Imports()
	for i := range imports.Len() {
		if _, err := standard(imports.Get(i).FileDescriptor, reg); err != nil {
			return nil, err
		}
	}
	out, err := protodesc.NewFile(protodesc.ToFileDescriptorProto(fd), reg)
	if err != nil {
		return nil, err
	}
	if err := reg.RegisterFile(out); err != nil {
		return nil, err
	}
	return out, nil
}

// protoReadable says whether messages written as w can be read as c by
// field number: every number both declare has the same kind (int32 and
// sint32 share a wire type but not a meaning; a string is not a message)
// and the same cardinality (a packed list is not a scalar), down through
// nested messages. Fields only one declares are fine: the canonical
// side's missing ones take their defaults, the writer's extra ones are
// dropped.
func protoReadable(w, c protoreflect.MessageDescriptor, seen map[[2]protoreflect.FullName]bool) error {
	key := [2]protoreflect.FullName{w.FullName(), c.FullName()}
	if seen[key] {
		return nil
	}
	seen[key] = true
	cf := c.Fields()
	for i := range cf.Len() {
		cfd := cf.Get(i)
		wfd := w.Fields().ByNumber(cfd.Number())
		if wfd == nil {
			continue
		}
		if wfd.IsMap() != cfd.IsMap() || wfd.IsList() != cfd.IsList() {
			return fmt.Errorf("field %d (%s) is a list or a map on one side only", cfd.Number(), cfd.Name())
		}
		if wfd.Kind() != cfd.Kind() {
			return fmt.Errorf("field %d is %s %s in the writer and %s %s in the canonical version", cfd.Number(), wfd.Name(), wfd.Kind(), cfd.Name(), cfd.Kind())
		}
		if wfd.Message() != nil && cfd.Message() != nil {
			if err := protoReadable(wfd.Message(), cfd.Message(), seen); err != nil {
				return fmt.Errorf("%s.%w", cfd.Name(), err)
			}
		}
	}
	return nil
}

// protoSubset says whether every message written as w is already one of
// c, byte for byte: each field w declares, c declares with the same
// number, kind and cardinality, down through nested messages, and c
// requires nothing. Adding fields makes such a version; its records are
// then checked as c and kept, only framed again.
func protoSubset(w, c protoreflect.MessageDescriptor, seen map[[2]protoreflect.FullName]bool) bool {
	key := [2]protoreflect.FullName{w.FullName(), c.FullName()}
	if seen[key] {
		return true
	}
	seen[key] = true
	// proto2 and proto3 check strings' UTF-8 differently (editions may
	// choose): bytes valid for one are not for the other.
	if ws, cs := w.ParentFile().Syntax(), c.ParentFile().Syntax(); ws != cs || ws == protoreflect.Editions {
		return false
	}
	wf := w.Fields()
	for i := range wf.Len() {
		wfd := wf.Get(i)
		cfd := c.Fields().ByNumber(wfd.Number())
		if cfd == nil || cfd.Kind() != wfd.Kind() || cfd.Cardinality() != wfd.Cardinality() ||
			cfd.IsList() != wfd.IsList() || cfd.IsMap() != wfd.IsMap() || cfd.IsPacked() != wfd.IsPacked() {
			return false
		}
		switch {
		case wfd.Message() != nil:
			if !protoSubset(wfd.Message(), cfd.Message(), seen) {
				return false
			}
		case wfd.Enum() != nil && wfd.Enum().FullName() != cfd.Enum().FullName():
			return false
		}
	}
	return true
}

// maxProtoBody bounds a Protobuf body, as Avro's decoder bounds its;
// maxProtoMessages bounds the messages it holds, nested ones included:
// the runtime's dynamic message costs about 2 KiB each, and an empty one
// is 2 bytes of body.
const (
	maxProtoBody     = 8 << 20
	maxProtoMessages = 1 << 16
)

// countMessages counts the messages b holds as md (nested and map entries
// included) from its wire bytes, before any is built, and refuses more
// than maxProtoMessages. Malformed bytes are left for the decoder to
// report.
func countMessages(md protoreflect.MessageDescriptor, b []byte) error {
	n := 0
	var walk func(md protoreflect.MessageDescriptor, b []byte, depth int) error
	walk = func(md protoreflect.MessageDescriptor, b []byte, depth int) error {
		if n++; n > maxProtoMessages {
			return fmt.Errorf("protobuf body holds more than %d messages", maxProtoMessages)
		}
		for len(b) > 0 && depth < protoIn.RecursionLimit {
			num, typ, k := protowire.ConsumeTag(b)
			if k < 0 {
				return nil
			}
			b = b[k:]
			if fd := md.Fields().ByNumber(num); fd != nil && fd.Message() != nil && typ == protowire.BytesType {
				v, k := protowire.ConsumeBytes(b)
				if k < 0 {
					return nil
				}
				if err := walk(fd.Message(), v, depth+1); err != nil {
					return err
				}
				b = b[k:]
				continue
			}
			if k = protowire.ConsumeFieldValue(num, typ, b); k < 0 {
				return nil
			}
			b = b[k:]
		}
		return nil
	}
	return walk(md, b, 0)
}

// The decoder's options bound what garbage can make it do. Required
// fields (proto2) are checked apart, only where a schema has them: the
// check walks every message.
var protoIn = proto.UnmarshalOptions{RecursionLimit: 64, AllowPartial: true}
var protoUpcast = proto.UnmarshalOptions{RecursionLimit: 64, AllowPartial: true, DiscardUnknown: true}

// unmarshalProto reads body into a new message of md with opts, and
// checks required fields if md's tree declares any (required, from
// hasRequired).
func unmarshalProto(opts proto.UnmarshalOptions, md protoreflect.MessageDescriptor, body []byte, required bool) (*dynamicpb.Message, error) {
	if len(body) > maxProtoBody {
		return nil, fmt.Errorf("protobuf body is %d bytes, more than %d", len(body), maxProtoBody)
	}
	if err := countMessages(md, body); err != nil {
		return nil, err
	}
	m := dynamicpb.NewMessage(md)
	if err := opts.Unmarshal(body, m); err != nil {
		return nil, err
	}
	if required {
		if err := proto.CheckInitialized(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// hasRequired says whether md or a message under it declares a required
// field.
func hasRequired(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	fs := md.Fields()
	for i := range fs.Len() {
		fd := fs.Get(i)
		if fd.Cardinality() == protoreflect.Required {
			return true
		}
		if sub := fd.Message(); sub != nil && hasRequired(sub, seen) {
			return true
		}
	}
	return false
}

// decodeProto reads body as md, strictly: field numbers md does not
// declare (anywhere in the tree) mean md did not write these bytes.
func decodeProto(md protoreflect.MessageDescriptor, body []byte, required bool) (*dynamicpb.Message, error) {
	m, err := unmarshalProto(protoIn, md, body, required)
	if err != nil {
		return nil, fmt.Errorf("protobuf body does not parse as %s: %w", md.FullName(), err)
	}
	if err := noUnknown(m, 0); err != nil {
		return nil, err
	}
	return m, nil
}

// noUnknown refuses a message holding fields its descriptor does not
// declare: random bytes often parse as a few unknown fields.
func noUnknown(m protoreflect.Message, depth int) error {
	if u := m.GetUnknown(); len(u) > 0 {
		n, _, _ := protowire.ConsumeTag(u)
		return fmt.Errorf("protobuf body holds field %d, which %s does not declare", n, m.Descriptor().FullName())
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
				err = noUnknown(e.Message(), depth+1)
				return err == nil
			})
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = noUnknown(l.Get(i).Message(), depth+1)
			}
		case !fd.IsMap() && !fd.IsList() && fd.Message() != nil:
			err = noUnknown(v.Message(), depth+1)
		}
		return err == nil
	})
	return err
}

// protoRecord is m as the map rules, the hook and the console read: every
// field of the message by its .proto name, unset ones with presence as
// null, scalars at their defaults otherwise (as in proto3 JSON with
// unpopulated fields emitted); enums by name, 64-bit integers as int64 or
// uint64, bytes as bytes, map keys as text, nested messages as maps.
// Strict, it also refuses (as noUnknown does) a message holding a field
// its descriptor does not declare, in the same walk. bodyLen is the size
// of the bytes m was read from: a record may hold at most
// recordValues(bodyLen) values, for a few bytes of empty nested messages
// must not make relay build millions of default fields.
func protoRecord(m protoreflect.Message, strict bool, bodyLen int) (map[string]any, error) {
	w := &recordWalk{strict: strict, left: recordValues(bodyLen)}
	return w.message(m)
}

// recordValues bounds the values of a record read from n bytes.
func recordValues(n int) int { return 4096 + 16*n }

type recordWalk struct {
	strict bool
	left   int // values the record may still hold
}

func (w *recordWalk) message(m protoreflect.Message) (map[string]any, error) {
	if w.strict && len(m.GetUnknown()) > 0 {
		n, _, _ := protowire.ConsumeTag(m.GetUnknown())
		return nil, fmt.Errorf("protobuf body holds field %d, which %s does not declare", n, m.Descriptor().FullName())
	}
	fields := m.Descriptor().Fields()
	if w.left -= fields.Len(); w.left < 0 {
		return nil, errors.New("protobuf record has more fields than its size allows (empty nested messages?)")
	}
	out := make(map[string]any, fields.Len())
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.HasPresence() && !m.Has(fd) {
			out[string(fd.Name())] = nil
			continue
		}
		v, err := w.field(fd, m.Get(fd))
		if err != nil {
			return nil, err
		}
		out[string(fd.Name())] = v
	}
	return out, nil
}

func (w *recordWalk) field(fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, error) {
	var err error
	switch {
	case fd.IsMap():
		out := make(map[string]any, v.Map().Len())
		v.Map().Range(func(k protoreflect.MapKey, e protoreflect.Value) bool {
			out[k.String()], err = w.scalar(fd.MapValue(), e)
			return err == nil
		})
		return out, err
	case fd.IsList():
		l := v.List()
		if w.left -= l.Len(); w.left < 0 {
			return nil, errors.New("protobuf record has more values than its size allows")
		}
		out := make([]any, l.Len())
		for i := 0; i < l.Len() && err == nil; i++ {
			out[i], err = w.scalar(fd, l.Get(i))
		}
		return out, err
	}
	return w.scalar(fd, v)
}

func (w *recordWalk) scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return w.message(v.Message())
	}
	return protoPlain(fd, v), nil
}

// declaredBy refuses a set field of m (read as the canonical message) that
// the writer's message w does not declare, down through nested messages:
// the strict check of a subset writer's bytes, read as the canonical
// message.
func declaredBy(m protoreflect.Message, w protoreflect.MessageDescriptor) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		wfd := w.Fields().ByNumber(fd.Number())
		if wfd == nil {
			err = fmt.Errorf("protobuf body holds field %d, which %s does not declare", fd.Number(), w.FullName())
			return false
		}
		switch {
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
				err = declaredBy(e.Message(), wfd.MapValue().Message())
				return err == nil
			})
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = declaredBy(l.Get(i).Message(), wfd.Message())
			}
		case !fd.IsMap() && !fd.IsList() && fd.Message() != nil:
			err = declaredBy(v.Message(), wfd.Message())
		}
		return err == nil
	})
	return err
}

// protoPlain is a value of a field that is not a message.
func protoPlain(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return int64(v.Enum())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int()
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return int64(v.Uint()) // fits: CEL compares it with int literals
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return v.Uint()
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return v.Float()
	case protoreflect.BoolKind:
		return v.Bool()
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BytesKind:
		return v.Bytes()
	}
	return v.Interface()
}

// protoFromRecord builds a message of md from a record in protoRecord's
// shape, or one that came from JSON (the hook's replacement): through
// protojson, which knows .proto and JSON names, enum names, base64 bytes
// and 64-bit integers as text or numbers. A field md does not declare is
// an error.
func protoFromRecord(md protoreflect.MessageDescriptor, rec map[string]any) (*dynamicpb.Message, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	m := dynamicpb.NewMessage(md)
	if err := (protojson.UnmarshalOptions{RecursionLimit: 64}).Unmarshal(b, m); err != nil {
		return nil, err
	}
	return m, nil
}
