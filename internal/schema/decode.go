package schema

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Decoded is a value read through the registry: its writer schema's id
// and the record it holds.
type Decoded struct {
	SchemaID int
	Format   Format
	Record   map[string]any
}

// Decode reads a value in the registry's wire format with its own writer
// schema, whatever versions relay accepts and whatever its type: what an
// operator looks at when a record was quarantined for its schema. The
// record has the shape rules and the hook see.
func Decode(ctx context.Context, c *Client, value []byte) (Decoded, error) {
	id, body, err := ParseWire(value)
	if err != nil {
		return Decoded{}, err
	}
	out := Decoded{SchemaID: id}
	t, err := c.Schema(ctx, id)
	if err != nil {
		return out, err
	}
	out.Format = t.Format
	s, err := compileText(ctx, c, t)
	if err != nil {
		return out, fmt.Errorf("schema %d: %w", id, err)
	}
	switch s.format {
	case FormatProtobuf:
		path, msgBody, err := ParseIndexes(body)
		if err != nil {
			return out, err
		}
		md, err := messageAt(s.proto, path)
		if err != nil {
			return out, err
		}
		m, err := decodeProto(md, msgBody, hasRequired(md, map[protoreflect.FullName]bool{}))
		if err != nil {
			return out, fmt.Errorf("schema %d: %w", id, err)
		}
		if out.Record, err = protoRecord(m, false, len(msgBody)); err != nil {
			return out, fmt.Errorf("schema %d: %w", id, err)
		}
	case FormatJSON:
		obj, err := parseJSON(body)
		if err != nil {
			return out, fmt.Errorf("schema %d: %w", id, err)
		}
		out.Record = jsonRecord(obj)
	default:
		rec, err := decode(s.avro, s.avro, body)
		if err != nil {
			return out, fmt.Errorf("schema %d: %w", id, err)
		}
		out.Record = rec
	}
	return out, nil
}
