package schema

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/hamba/avro/v2"
)

// The items of every block count toward one bound, and the
// bound is avroItems(len(body)) exactly.
func TestAvroItemsAddUpAcrossBlocks(t *testing.T) {
	nested := avro.MustParse(`{"type":"record","name":"r","fields":[{"name":"a","type":{"type":"array","items":{"type":"array","items":"null"}}}]}`)
	body := binary.AppendVarint(nil, 4)
	for range 4 {
		body = binary.AppendVarint(body, 3000) // each under the bound, 12,000 in all
		body = binary.AppendVarint(body, 0)
	}
	body = binary.AppendVarint(body, 0)
	if _, err := decode(nested, nested, body); !errors.Is(err, errTooManyItems) {
		t.Errorf("4 blocks of 3,000 nulls in %d bytes: %v", len(body), err)
	}
	flat := avro.MustParse(`{"type":"record","name":"f","fields":[{"name":"a","type":{"type":"array","items":"null"}}]}`)
	claim := func(n int64) []byte { return binary.AppendVarint(binary.AppendVarint(nil, n), 0) }
	limit := int64(avroItems(len(claim(4100))))
	if _, err := decode(flat, flat, claim(limit)); err != nil {
		t.Errorf("%d nulls, the bound: %v", limit, err)
	}
	if _, err := decode(flat, flat, claim(limit+1)); !errors.Is(err, errTooManyItems) {
		t.Errorf("%d nulls, one past the bound: %v", limit+1, err)
	}
}
