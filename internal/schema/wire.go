package schema

import (
	"encoding/binary"
	"fmt"
)

// The Confluent wire format: magic byte 0, the schema id as a 4-byte
// big-endian integer, then the Avro binary body.
const (
	magic      = 0
	headerSize = 5
)

// WireError says why bytes are not in the wire format.
type WireError struct{ Problem string }

func (e *WireError) Error() string { return "wire format: " + e.Problem }

// ParseWire splits a framed value into its schema id and body. It never
// panics and never allocates (fuzzed).
func ParseWire(b []byte) (id int, body []byte, err error) {
	switch {
	case len(b) == 0:
		return 0, nil, &WireError{"empty value"}
	case b[0] != magic:
		return 0, nil, &WireError{fmt.Sprintf("magic byte is 0x%02x, want 0x00", b[0])}
	case len(b) < headerSize:
		return 0, nil, &WireError{fmt.Sprintf("%d bytes, shorter than the 5-byte header", len(b))}
	}
	u := binary.BigEndian.Uint32(b[1:headerSize])
	if u == 0 || u > 1<<31-1 {
		return 0, nil, &WireError{fmt.Sprintf("schema id %d is out of range", u)}
	}
	return int(u), b[headerSize:], nil
}

// AppendWire frames body with id, appending to dst.
func AppendWire(dst []byte, id int, body []byte) []byte {
	dst = append(dst, magic)
	dst = binary.BigEndian.AppendUint32(dst, uint32(id))
	return append(dst, body...)
}
