package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	segjson "github.com/segmentio/encoding/json"
)

// mainURL is where a registered JSON Schema without an absolute $id is
// compiled: its relative $refs resolve against it, to the names its
// references are registered by. The scheme loads nothing: a $ref that is
// not one of the schema's references fails to compile, and relay never
// fetches a schema from a URL or a file.
const mainURL = "relay-registry:///schema.json"

// maxJSONBody bounds what one JSON record may hold before it is parsed;
// maxJSONDepth bounds its nesting (the parser has no bound of its own, and
// its time grows faster than the depth).
const (
	maxJSONBody  = 8 << 20
	maxJSONDepth = 256
)

// compileJSON compiles a JSON Schema with its references. The schema's
// draft is its $schema, the newest (2020-12) without one.
func compileJSON(t Text, refs *referenced) (*compiled, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(t.Schema))
	if err != nil {
		return nil, fmt.Errorf("JSON schema is not JSON: %w", err)
	}
	base := mainURL
	if obj, ok := doc.(map[string]any); ok {
		if id, ok := obj["$id"].(string); ok {
			if u, err := neturl.Parse(id); err == nil && u.IsAbs() {
				base = id
			}
		}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // nothing is loaded from outside
	if err := c.AddResource(base, doc); err != nil {
		return nil, err
	}
	b, _ := neturl.Parse(base)
	for _, n := range refs.names {
		rt := refs.texts[n]
		if rt.Format != FormatJSON {
			return nil, fmt.Errorf("reference %q is a %s schema, not JSON", n, rt.Format)
		}
		rdoc, err := jsonschema.UnmarshalJSON(strings.NewReader(rt.Schema))
		if err != nil {
			return nil, fmt.Errorf("referenced schema %q is not JSON: %w", n, err)
		}
		u, err := neturl.Parse(n)
		if err != nil {
			return nil, fmt.Errorf("reference name %q is not a URL: %w", n, err)
		}
		if err := c.AddResource(b.ResolveReference(u).String(), rdoc); err != nil {
			return nil, fmt.Errorf("reference %q: %w", n, err)
		}
	}
	s, err := c.Compile(base)
	if err != nil {
		return nil, fmt.Errorf("JSON schema does not compile: %w", err)
	}
	return &compiled{format: FormatJSON, json: s}, nil
}

// parseJSON reads a JSON record body: one JSON object, nothing after it.
// Numbers stay json.Number for the validator.
func parseJSON(body []byte) (map[string]any, error) {
	if len(body) == 0 {
		return nil, errors.New("JSON body is empty")
	}
	if len(body) > maxJSONBody {
		return nil, fmt.Errorf("JSON body is %d bytes, more than %d", len(body), maxJSONBody)
	}
	if err := jsonDepth(body); err != nil {
		return nil, err
	}
	// segmentio's decoder, not encoding/json: 1.7 µs for a 1.3 KiB
	// record, not 13 (relay-bench -formats); numbers stay json.Number.
	// Its error quotes the record: only the position is kept.
	var doc any
	rest, err := segjson.Parse(body, &doc, segjson.UseNumber)
	if err != nil {
		var se *segjson.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("JSON body does not parse (byte %d)", se.Offset)
		}
		return nil, fmt.Errorf("JSON body does not parse (byte %d)", len(body)-len(rest))
	}
	if len(bytes.TrimLeft(rest, " \t\r\n")) > 0 {
		return nil, errors.New("JSON body has bytes after the object")
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("JSON body is a %s, relay reads objects", jsonKind(doc))
	}
	if err := finiteNumbers(obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// jsonDepth refuses a body nested deeper than maxJSONDepth, in one pass
// over its bytes: strings (where brackets do not count, and where a
// record's bytes mostly are) are skipped by IndexByte to their closing
// quote.
func jsonDepth(b []byte) error {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for {
				k := bytes.IndexByte(b[i+1:], '"')
				if k < 0 {
					return nil // unterminated: the parser says so
				}
				i += 1 + k
				escapes := 0
				for j := i - 1; b[j] == '\\'; j-- {
					escapes++
				}
				if escapes%2 == 0 {
					break
				}
			}
		case '{', '[':
			if depth++; depth > maxJSONDepth {
				return fmt.Errorf("JSON body nests deeper than %d levels", maxJSONDepth)
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

// finiteNumbers refuses a number outside float64's range (1e400): the
// validator cannot compare one (it would fail on it), and no consumer
// reading JSON into doubles can hold it.
func finiteNumbers(v any) error {
	switch x := v.(type) {
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			return fmt.Errorf("JSON body holds a number outside the range of a double (%d digits)", len(x))
		}
	case map[string]any:
		for _, e := range x {
			if err := finiteNumbers(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := finiteNumbers(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// validate checks doc against s; a panic of the validator (a value it
// cannot handle) is the record's failure, not relay's crash.
func validate(s *jsonschema.Schema, doc any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the validator could not read the record: %v", r)
		}
	}()
	return s.Validate(doc)
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "JSON array"
	case string:
		return "JSON string"
	case json.Number:
		return "JSON number"
	case bool:
		return "JSON boolean"
	case nil:
		return "JSON null"
	}
	return fmt.Sprintf("%T", v)
}

// validationProblem is a validation error in a line: where in the record
// and what the schema wanted, without the record's values.
func validationProblem(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	loc := "/" + strings.Join(ve.InstanceLocation, "/")
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		return fmt.Sprintf("at %s: missing required %s", loc, strings.Join(k.Missing, ", "))
	case *kind.Type:
		return fmt.Sprintf("at %s: a %s where the schema wants %s", loc, k.Got, strings.Join(k.Want, " or "))
	}
	return fmt.Sprintf("at %s: fails %q", loc, strings.Join(ve.ErrorKind.KeywordPath(), "/"))
}

// jsonRecord turns a parsed JSON object, in place, into what rules and
// the hook read: whole numbers as int64, others as float64 (CEL compares
// them), the rest as encoding/json gives it.
func jsonRecord(obj map[string]any) map[string]any {
	for k, v := range obj {
		obj[k] = jsonValue(v)
	}
	return obj
}

func jsonValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		return jsonRecord(x)
	case []any:
		for i, e := range x {
			x[i] = jsonValue(e)
		}
		return x
	}
	return v
}
