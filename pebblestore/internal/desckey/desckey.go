package desckey

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
)

// ErrCorrupt reports bytes that are not a valid encoding.
var ErrCorrupt = errors.New("desckey: corrupt key")

const (
	escape     = 0x00
	escaped00  = 0xFF // 0x00 0xFF encodes a 0x00 byte
	terminator = 0x01 // 0x00 0x01 ends the string
)

// AppendCursor appends the list-order key of (t, id) to dst. t must be in
// 0..math.MaxInt64; a negative t panics, since it is a caller bug.
func AppendCursor(dst []byte, t int64, id []byte) []byte {
	if t < 0 {
		panic("desckey: negative time")
	}
	dst = binary.BigEndian.AppendUint64(dst, ^uint64(t))
	for _, c := range id {
		if c == escape {
			dst = append(dst, ^byte(escape), ^byte(escaped00))
			continue
		}
		dst = append(dst, ^c)
	}
	return append(dst, ^byte(escape), ^byte(terminator))
}

// DecodeCursor decodes a key written by AppendCursor at the start of b and
// returns the rest of b after it. id is a new slice.
func DecodeCursor(b []byte) (t int64, id, rest []byte, err error) {
	return AppendDecodedCursor(nil, b)
}

// AppendDecodedCursor is DecodeCursor appending the ID to dst, so a caller
// decoding many keys can reuse one buffer.
func AppendDecodedCursor(dst, b []byte) (t int64, id, rest []byte, err error) {
	if len(b) < 8 {
		return 0, nil, nil, ErrCorrupt
	}
	u := ^binary.BigEndian.Uint64(b)
	if u > math.MaxInt64 {
		return 0, nil, nil, ErrCorrupt
	}
	id, rest, err = decodeBytes(dst, b[8:], 0xFF)
	if err != nil {
		return 0, nil, nil, err
	}
	return int64(u), id, rest, nil
}

// AppendAscending appends the ascending, prefix-free encoding of s to dst:
// bytes.Compare of two encodings equals bytes.Compare of the strings, and no
// encoding is a prefix of another.
func AppendAscending(dst []byte, s []byte) []byte {
	for _, c := range s {
		if c == escape {
			dst = append(dst, escape, escaped00)
			continue
		}
		dst = append(dst, c)
	}
	return append(dst, escape, terminator)
}

// DecodeAscending decodes a string written by AppendAscending at the start
// of b and returns the rest of b after it. s is a new slice.
func DecodeAscending(b []byte) (s, rest []byte, err error) {
	return decodeBytes(nil, b, 0)
}

// decodeBytes undoes the escaping, appending to dst; mask is 0xFF for
// complemented input. A string without a 0x00 byte (every task ID: IDs
// hold none) is copied whole, up to its terminator.
func decodeBytes(dst, b []byte, mask byte) (s, rest []byte, err error) {
	if i := bytes.IndexByte(b, escape^mask); i >= 0 && i+1 < len(b) && b[i+1]^mask == terminator {
		if dst == nil {
			dst = make([]byte, 0, i)
		}
		s = append(dst, b[:i]...)
		if mask != 0 {
			complement(s[len(dst):])
		}
		return s, b[i+2:], nil
	}
	s = dst
	if s == nil {
		s = make([]byte, 0, len(b))
	}
	for i := 0; i < len(b); i++ {
		c := b[i] ^ mask
		if c != escape {
			s = append(s, c)
			continue
		}
		if i+1 == len(b) {
			return nil, nil, ErrCorrupt
		}
		switch b[i+1] ^ mask {
		case escaped00:
			s = append(s, 0)
			i++
		case terminator:
			return s, b[i+2:], nil
		default:
			return nil, nil, ErrCorrupt
		}
	}
	return nil, nil, ErrCorrupt
}

// PrefixEnd returns the smallest key greater than every key starting with
// prefix, or nil when there is none (prefix is all 0xFF bytes): the
// exclusive upper bound of a prefix scan.
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// complement inverts every byte of s, eight at a time.
func complement(s []byte) {
	for len(s) >= 8 {
		binary.LittleEndian.PutUint64(s, ^binary.LittleEndian.Uint64(s))
		s = s[8:]
	}
	for i := range s {
		s[i] = ^s[i]
	}
}
