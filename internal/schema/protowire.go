package schema

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Protobuf's Confluent framing puts a message-index array between the
// schema id and the body: which message of the schema's file wrote the
// body, as a path (the top-level message, then nested ones). It is a
// zig-zag varint count followed by that many zig-zag varint indexes; a
// count of 0 (one zero byte) is the shorthand for [0], the file's first
// message.

// maxIndexes bounds the path: deeper nesting than this is garbage.
const maxIndexes = 32

// firstMessage is the framing of index [0], as producers write it.
var firstMessage = []int{0}

// ParseIndexes splits a Protobuf body (what follows the schema id) into
// its message-index path and the message bytes. It never panics (fuzzed).
func ParseIndexes(b []byte) (path []int, body []byte, err error) {
	n, k := binary.Varint(b)
	switch {
	case k == 0:
		return nil, nil, &WireError{"protobuf message indexes: no bytes after the schema id"}
	case k < 0:
		return nil, nil, &WireError{"protobuf message indexes: the count is not a varint"}
	case n == 0:
		return firstMessage, b[k:], nil
	case n < 0 || n > maxIndexes:
		return nil, nil, &WireError{fmt.Sprintf("protobuf message indexes: count %d is outside 1..%d", n, maxIndexes)}
	}
	b = b[k:]
	path = make([]int, 0, n)
	for i := range n {
		x, k := binary.Varint(b)
		if k <= 0 {
			return nil, nil, &WireError{fmt.Sprintf("protobuf message indexes: index %d of %d is truncated or not a varint", i+1, n)}
		}
		if x < 0 || x > 1<<20 {
			return nil, nil, &WireError{fmt.Sprintf("protobuf message indexes: index %d is %d", i+1, x)}
		}
		path = append(path, int(x))
		b = b[k:]
	}
	return path, b, nil
}

// AppendIndexes appends the framing of path: the one-byte shorthand for
// [0], the full array otherwise.
func AppendIndexes(dst []byte, path []int) []byte {
	if len(path) == 1 && path[0] == 0 {
		return append(dst, 0)
	}
	dst = binary.AppendVarint(dst, int64(len(path)))
	for _, x := range path {
		dst = binary.AppendVarint(dst, int64(x))
	}
	return dst
}

// messageAt is the message a path names in file.
func messageAt(file protoreflect.FileDescriptor, path []int) (protoreflect.MessageDescriptor, error) {
	msgs := file.Messages()
	var md protoreflect.MessageDescriptor
	for i, x := range path {
		if x >= msgs.Len() {
			where := "the file"
			if md != nil {
				where = string(md.FullName())
			}
			return nil, &WireError{fmt.Sprintf("protobuf message index %v: %s has %d messages, index %d at level %d is past them", path, where, msgs.Len(), x, i+1)}
		}
		md = msgs.Get(x)
		msgs = md.Messages()
	}
	return md, nil
}
