package storetest

import (
	"encoding/base64"
	"encoding/binary"
	"math"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// The suite's own reading and writing of v1 page tokens, from SPEC T2–T4
// rather than engine.EncodeToken and engine.DecodeToken, so that a bug in
// the codec every backend shares cannot pass the checks that build or
// interpret tokens (the reference model's next-page tokens are compared
// with the store's byte for byte).
//
// A v1 token is "v1." followed by the unpadded URL-safe base64 (RFC 4648
// §5) of the boundary cursor: UpdatedAt as 8 bytes, big-endian, then the
// ID's raw bytes. Exactly one spelling decodes to a cursor (T3).

const specTokenPrefix = "v1."

// specToken is the v1 token of c.
func specToken(c engine.Cursor) string {
	raw := binary.BigEndian.AppendUint64(nil, uint64(c.UpdatedAt))
	return specTokenPrefix + base64.RawURLEncoding.EncodeToString(append(raw, c.ID...))
}

// specBoundary returns the cursor tok encodes, or false when tok is not
// the canonical v1 token of a valid cursor: time 0..MaxInt64, an ID of
// 1..1024 bytes (T3, T4).
func specBoundary(tok string) (engine.Cursor, bool) {
	if len(tok) > len(specTokenPrefix)+base64.RawURLEncoding.EncodedLen(8+specMaxIDBytes) ||
		len(tok) < len(specTokenPrefix) || tok[:len(specTokenPrefix)] != specTokenPrefix {
		return engine.Cursor{}, false
	}
	body := tok[len(specTokenPrefix):]
	raw, err := base64.RawURLEncoding.DecodeString(body)
	// Re-encoding rejects every other spelling: padding, line breaks, stray
	// trailing bits.
	if err != nil || base64.RawURLEncoding.EncodeToString(raw) != body {
		return engine.Cursor{}, false
	}
	if len(raw) < 8+1 || len(raw) > 8+specMaxIDBytes {
		return engine.Cursor{}, false
	}
	at := binary.BigEndian.Uint64(raw)
	if at > math.MaxInt64 {
		return engine.Cursor{}, false
	}
	return engine.Cursor{UpdatedAt: int64(at), ID: a2a.TaskID(raw[8:])}, true
}
