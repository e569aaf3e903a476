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
	"google.golang.org/protobuf/reflect/protoreflect"
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
	return &compiled{format: FormatProtobuf, proto: f}, nil
}

// wireType is the wire type a field's values are written with.
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.VarintType
}

// protoReadable says whether messages written as w can be read as c by
// field number: every number both declare has the same wire type (so a
// packed repeated field's elements read the same too), down through
// nested messages. Fields only one declares are fine: the
// canonical side's missing ones take their defaults, the writer's extra
// ones are dropped.
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
		wt, ct := wireType(wfd.Kind()), wireType(cfd.Kind())
		if wfd.IsMap() != cfd.IsMap() {
			return fmt.Errorf("field %d (%s) is a map on one side only", cfd.Number(), cfd.Name())
		}
		if wt != ct {
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

// protoLimits bound what garbage can make the decoder do.
var protoIn = proto.UnmarshalOptions{RecursionLimit: 64}
var protoUpcast = proto.UnmarshalOptions{RecursionLimit: 64, DiscardUnknown: true}

// decodeProto reads body as md, strictly: field numbers md does not
// declare (anywhere in the tree) mean md did not write these bytes.
func decodeProto(md protoreflect.MessageDescriptor, body []byte) (*dynamicpb.Message, error) {
	m := dynamicpb.NewMessage(md)
	if err := protoIn.Unmarshal(body, m); err != nil {
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
func protoRecord(m protoreflect.Message) map[string]any {
	fields := m.Descriptor().Fields()
	out := make(map[string]any, fields.Len())
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.HasPresence() && !m.Has(fd) {
			out[string(fd.Name())] = nil
			continue
		}
		out[string(fd.Name())] = protoField(fd, m.Get(fd))
	}
	return out
}

func protoField(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch {
	case fd.IsMap():
		out := make(map[string]any, v.Map().Len())
		v.Map().Range(func(k protoreflect.MapKey, e protoreflect.Value) bool {
			out[k.String()] = protoScalar(fd.MapValue(), e)
			return true
		})
		return out
	case fd.IsList():
		l := v.List()
		out := make([]any, l.Len())
		for i := range l.Len() {
			out[i] = protoScalar(fd, l.Get(i))
		}
		return out
	}
	return protoScalar(fd, v)
}

func protoScalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return protoRecord(v.Message())
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
