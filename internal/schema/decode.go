package schema

import (
	"context"
	"fmt"

	"github.com/hamba/avro/v2"
)

// Decoded is a value read through the registry: its writer schema's id
// and the record it holds.
type Decoded struct {
	SchemaID int
	Record   map[string]any
}

// Decode reads a value in the registry's wire format with its own writer
// schema, whatever versions relay accepts: what an operator looks at when
// a record was quarantined for its schema.
func Decode(ctx context.Context, c *Client, value []byte) (Decoded, error) {
	id, body, err := ParseWire(value)
	if err != nil {
		return Decoded{}, err
	}
	text, err := c.Schema(ctx, id)
	if err != nil {
		return Decoded{SchemaID: id}, err
	}
	s, err := avro.Parse(text)
	if err != nil {
		return Decoded{SchemaID: id}, fmt.Errorf("schema %d: %w", id, err)
	}
	rec, err := decode(s, body)
	if err != nil {
		return Decoded{SchemaID: id}, fmt.Errorf("schema %d: %w", id, err)
	}
	return Decoded{SchemaID: id, Record: rec}, nil
}
