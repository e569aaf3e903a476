package envelope

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Fingerprint is the short hash relay.source.fingerprint carries: the
// first 8 bytes of SHA-256 over the key's length (a uvarint), the key and
// the value, in hex. It tells two records apart, it does not prove who
// wrote one: anyone who can read the source can compute it.
func Fingerprint(key, value []byte) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(key)))])
	h.Write(key)
	h.Write(value)
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:8])
}
