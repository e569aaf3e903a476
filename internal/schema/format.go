package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Format is a schema type a Confluent-compatible registry serves.
type Format string

const (
	FormatAvro     Format = "AVRO"
	FormatProtobuf Format = "PROTOBUF"
	FormatJSON     Format = "JSON"
)

// Text is a schema as the registry gives it: its text, its type and the
// other subjects it refers to (Protobuf imports, JSON Schema $refs, Avro
// named types).
type Text struct {
	Schema     string
	Format     Format
	References []Reference
}

// Reference names another registered schema that a schema uses: Name is
// the import path or $ref it is known by in the referring schema.
type Reference struct {
	Name    string
	Subject string
	Version int
}

// Reference bounds: a schema's references are fetched from the registry
// (each once per compile); garbage or a cycle must not make relay fetch
// without end.
const (
	maxReferences     = 64
	maxReferenceDepth = 16
)

// compiled is one schema, parsed for its format.
type compiled struct {
	format Format
	avro   avro.Schema
	proto  protoreflect.FileDescriptor
	json   *jsonschema.Schema
}

// referenced is a schema's references, fetched: by name, in the order
// their dependencies come first.
type referenced struct {
	names []string
	texts map[string]Text
}

// fetchReferences fetches every schema t refers to, transitively, through
// reg. A registry failure is returned as it is (it may heal); a reference
// that the registry does not know is ErrNotFound.
func fetchReferences(ctx context.Context, reg Registry, t Text) (*referenced, error) {
	out := &referenced{texts: map[string]Text{}}
	var walk func(refs []Reference, depth int) error
	walk = func(refs []Reference, depth int) error {
		if depth > maxReferenceDepth {
			return &compileError{fmt.Errorf("schema references nest deeper than %d", maxReferenceDepth)}
		}
		for _, r := range refs {
			if _, ok := out.texts[r.Name]; ok {
				continue
			}
			if len(out.texts) >= maxReferences {
				return &compileError{fmt.Errorf("schema has more than %d references", maxReferences)}
			}
			_, rt, err := reg.ByVersion(ctx, r.Subject, r.Version)
			if err != nil {
				err = fmt.Errorf("reference %q (subject %s version %d): %w", r.Name, r.Subject, r.Version, err)
				if errors.Is(err, ErrNotFound) {
					// The schema is known; what it needs is not there.
					return &compileError{err}
				}
				return err
			}
			out.texts[r.Name] = rt // marked before its own references: a cycle ends here
			if err := walk(rt.References, depth+1); err != nil {
				return err
			}
			out.names = append(out.names, r.Name)
		}
		return nil
	}
	if err := walk(t.References, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// compileText fetches t's references and compiles it for its format. A
// registry failure is returned unwrapped (the caller sorts it); a schema
// that does not compile is a *compileError.
func compileText(ctx context.Context, reg Registry, t Text) (*compiled, error) {
	refs := &referenced{texts: map[string]Text{}}
	if len(t.References) > 0 {
		var err error
		if refs, err = fetchReferences(ctx, reg, t); err != nil {
			return nil, err
		}
	}
	var c *compiled
	var err error
	switch t.Format {
	case FormatAvro:
		c, err = compileAvro(t, refs)
	case FormatProtobuf:
		c, err = compileProto(ctx, t, refs)
	case FormatJSON:
		c, err = compileJSON(t, refs)
	default:
		err = fmt.Errorf("schema type %q is not one relay reads (AVRO, PROTOBUF, JSON)", t.Format)
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			// The compile was cut short (the lookup's deadline, a
			// shutdown): no verdict on the schema, which may compile.
			return nil, &UnavailableError{fmt.Errorf("compiling the schema: %w", cerr)}
		}
		return nil, &compileError{err}
	}
	return c, nil
}

// compileError says a schema, fetched whole, does not compile.
type compileError struct{ err error }

func (e *compileError) Error() string { return e.err.Error() }
func (e *compileError) Unwrap() error { return e.err }

// compileAvro parses an Avro schema after the named types it refers to.
func compileAvro(t Text, refs *referenced) (*compiled, error) {
	cache := &avro.SchemaCache{}
	for _, n := range refs.names {
		if _, err := avro.ParseWithCache(refs.texts[n].Schema, "", cache); err != nil {
			return nil, fmt.Errorf("referenced schema %q: %w", n, err)
		}
	}
	s, err := avro.ParseWithCache(t.Schema, "", cache)
	if err != nil {
		return nil, err
	}
	return &compiled{format: FormatAvro, avro: s}, nil
}
