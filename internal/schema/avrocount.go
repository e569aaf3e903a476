package schema

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
)

// A few bytes can claim a million array items of a type that takes no
// bytes (null, an empty record): the decoder's per-array bound
// (MaxSliceAllocSize) let a 27-byte record allocate 222 MiB, arrays inside
// arrays (ninth pentest). Before decoding, a pass that reads nothing but
// lengths counts the items and map entries the body claims, and refuses
// more than avroItems(len(body)): every item but a null or an empty
// record takes a byte at least.

var errTooManyItems = errors.New("the avro body claims more array items or map entries than its bytes can hold")

type avroCount struct {
	b    []byte
	left int
}

// avroItems bounds the items and entries of a record read from n bytes.
func avroItems(n int) int { return 4096 + 2*n }

// checkAvroItems says whether body, read with s, claims at most
// avroItems(len(body)) items and entries in all.
func checkAvroItems(s avro.Schema, body []byte) error {
	c := &avroCount{b: body, left: avroItems(len(body))}
	return c.skip(s, 0)
}

func (c *avroCount) long() (int64, error) {
	v, n := binary.Varint(c.b) // Avro's zig-zag varint is Go's
	if n <= 0 {
		return 0, fmt.Errorf("avro body ends early")
	}
	c.b = c.b[n:]
	return v, nil
}

func (c *avroCount) take(n int64) error {
	if n < 0 || n > int64(len(c.b)) {
		return fmt.Errorf("avro body ends early")
	}
	c.b = c.b[n:]
	return nil
}

func (c *avroCount) skip(s avro.Schema, depth int) error {
	if depth > 64 {
		return errors.New("the avro schema nests deeper than 64")
	}
	switch t := s.(type) {
	case *avro.RefSchema:
		return c.skip(t.Schema(), depth+1)
	case *avro.RecordSchema:
		for _, f := range t.Fields() {
			if err := c.skip(f.Type(), depth+1); err != nil {
				return err
			}
		}
		return nil
	case *avro.UnionSchema:
		i, err := c.long()
		if err != nil {
			return err
		}
		ts := t.Types()
		if i < 0 || i >= int64(len(ts)) {
			return fmt.Errorf("avro union branch %d of %d", i, len(ts))
		}
		return c.skip(ts[i], depth+1)
	case *avro.ArraySchema:
		return c.blocks(depth, func() error { return c.skip(t.Items(), depth+1) })
	case *avro.MapSchema:
		return c.blocks(depth, func() error {
			n, err := c.long()
			if err != nil {
				return err
			}
			if err := c.take(n); err != nil {
				return err
			}
			return c.skip(t.Values(), depth+1)
		})
	case *avro.NullSchema:
		return nil
	case *avro.FixedSchema:
		return c.take(int64(t.Size()))
	case *avro.EnumSchema:
		_, err := c.long()
		return err
	case *avro.PrimitiveSchema:
		switch t.Type() {
		case avro.Null:
			return nil
		case avro.Boolean:
			return c.take(1)
		case avro.Int, avro.Long:
			_, err := c.long()
			return err
		case avro.Float:
			return c.take(4)
		case avro.Double:
			return c.take(8)
		case avro.String, avro.Bytes:
			n, err := c.long()
			if err != nil {
				return err
			}
			return c.take(n)
		}
	}
	return fmt.Errorf("avro schema type %s not counted", s.Type())
}

// blocks reads an array's or a map's blocks, counting their items before
// reading them.
func (c *avroCount) blocks(depth int, item func() error) error {
	for {
		n, err := c.long()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n < 0 {
			n = -n
			if _, err := c.long(); err != nil { // the block's size in bytes
				return err
			}
		}
		if n > int64(c.left) {
			return errTooManyItems
		}
		c.left -= int(n)
		for range n {
			if err := item(); err != nil {
				return err
			}
		}
	}
}
