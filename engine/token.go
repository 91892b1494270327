package engine

import (
	"encoding/base64"
	"encoding/binary"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Page tokens, version 1 (T2–T4).
//
// A v1 token is the prefix "v1." followed by the unpadded URL-safe base64
// (RFC 4648 §5) of the boundary cursor: 8 bytes of UpdatedAt, big-endian,
// then the raw ID bytes. Every character is RFC 3986 unreserved, so the
// token travels unchanged in a JSON body, a query parameter and a gRPC
// field. It is opaque to clients, neither signed nor encrypted, and not a
// credential.
//
// Decoding is strict: exactly one spelling decodes to a given cursor (no
// padding, no line breaks, no stray trailing bits), so a decoded token
// re-encodes to the identical string.

const (
	tokenPrefix = "v1."
	// MaxIDBytes is the largest task or context ID, in bytes (S8).
	MaxIDBytes = 1024
	// MaxOwnerBytes is the longest task owner, in bytes (O1).
	MaxOwnerBytes = 1024
	// maxTokenLen bounds the input DecodeToken looks at.
	maxTokenLen = len(tokenPrefix) + (8+MaxIDBytes)*4/3 + 4
)

var tokenEncoding = base64.RawURLEncoding.Strict()

// EncodeToken returns the v1 token of c. c must be a valid cursor
// (UpdatedAt >= 0, ID of 1..MaxIDBytes bytes); stores only encode cursors of
// tasks they returned.
func EncodeToken(c Cursor) string {
	buf := make([]byte, 8+len(c.ID))
	binary.BigEndian.PutUint64(buf, uint64(c.UpdatedAt))
	copy(buf[8:], c.ID)
	return tokenPrefix + tokenEncoding.EncodeToString(buf)
}

// DecodeToken returns the cursor a token encodes. Every failure, the empty
// string included, is ErrInvalidPageToken, whose message never echoes the
// token (T4).
func DecodeToken(s string) (Cursor, error) {
	if len(s) > maxTokenLen || !strings.HasPrefix(s, tokenPrefix) {
		return Cursor{}, ErrInvalidPageToken
	}
	body := s[len(tokenPrefix):]
	// The base64 decoder skips CR and LF; only the alphabet is canonical.
	for i := 0; i < len(body); i++ {
		if !isTokenChar(body[i]) {
			return Cursor{}, ErrInvalidPageToken
		}
	}
	buf, err := tokenEncoding.DecodeString(body)
	if err != nil || len(buf) < 9 || len(buf) > 8+MaxIDBytes {
		return Cursor{}, ErrInvalidPageToken
	}
	t := binary.BigEndian.Uint64(buf)
	if t > 1<<63-1 {
		return Cursor{}, ErrInvalidPageToken
	}
	return Cursor{UpdatedAt: int64(t), ID: a2a.TaskID(buf[8:])}, nil
}

func isTokenChar(b byte) bool {
	return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-' || b == '_'
}
