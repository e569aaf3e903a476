package schema

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/hamba/avro/v2"
)

// fromJSON converts a value decoded from JSON (numbers as json.Number) to
// the Go types Avro encoding needs for schema s: int and long from whole
// numbers, float and double from any number, bytes from base64 text, and
// the same inside records, arrays, maps and unions. Values that are already
// native pass through unchanged.
func fromJSON(s avro.Schema, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch s.Type() {
	case avro.Ref:
		return fromJSON(s.(*avro.RefSchema).Schema(), v)
	case avro.Int, avro.Long:
		return wholeFromJSON(s.Type(), v)
	case avro.Float, avro.Double:
		return realFromJSON(s.Type(), v)
	case avro.Bytes:
		if str, ok := v.(string); ok {
			return base64.StdEncoding.DecodeString(str)
		}
		return v, nil
	case avro.Record:
		return recordFromJSON(s.(*avro.RecordSchema), v)
	case avro.Array:
		return arrayFromJSON(s.(*avro.ArraySchema), v)
	case avro.Map:
		return mapFromJSON(s.(*avro.MapSchema), v)
	case avro.Union:
		// The first branch the value converts to without error; for a
		// nullable union that is the non-null branch.
		for _, t := range s.(*avro.UnionSchema).Types() {
			if t.Type() == avro.Null {
				continue
			}
			if c, err := fromJSON(t, v); err == nil {
				return c, nil
			}
		}
		return v, nil
	}
	return v, nil
}

// wholeFromJSON is an int or long from a whole JSON number.
func wholeFromJSON(t avro.Type, v any) (any, error) {
	n, ok := v.(json.Number)
	if !ok {
		return v, nil
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s is not a whole number", n)
	}
	if t == avro.Int {
		return int(i), nil
	}
	return i, nil
}

// realFromJSON is a float or double from any JSON number.
func realFromJSON(t avro.Type, v any) (any, error) {
	n, ok := v.(json.Number)
	if !ok {
		return v, nil
	}
	f, err := n.Float64()
	if err != nil {
		return nil, err
	}
	if t == avro.Float {
		return float32(f), nil
	}
	return f, nil
}

func recordFromJSON(s *avro.RecordSchema, v any) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return v, nil
	}
	out := make(map[string]any, len(m))
	for _, f := range s.Fields() {
		fv, present := m[f.Name()]
		if !present {
			continue
		}
		c, err := fromJSON(f.Type(), fv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name(), err)
		}
		out[f.Name()] = c
	}
	return out, nil
}

func arrayFromJSON(s *avro.ArraySchema, v any) (any, error) {
	a, ok := v.([]any)
	if !ok {
		return v, nil
	}
	out := make([]any, len(a))
	for i, e := range a {
		c, err := fromJSON(s.Items(), e)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out[i] = c
	}
	return out, nil
}

func mapFromJSON(s *avro.MapSchema, v any) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return v, nil
	}
	out := make(map[string]any, len(m))
	for k, e := range m {
		c, err := fromJSON(s.Values(), e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = c
	}
	return out, nil
}
