// Package desckey encodes list positions as byte strings whose plain byte
// order is list order, so an ordered key-value store can serve pages with
// one seek.
//
// List order (a2astore SPEC S6) is time descending, then ID descending in
// byte order. A Cursor key is
//
//	^uint64(time) big-endian (8 bytes) ‖ complement(escape(id) ‖ 0x00 0x01)
//
// escape replaces every 0x00 byte with 0x00 0xFF; the 0x00 0x01 terminator
// makes the ascending encoding prefix-free (an ID that is a prefix of
// another sorts first, NUL and 0xFF bytes sort where they should), and
// complementing every byte of a prefix-free set reverses its order. The
// result: for valid times a, b ≥ 0,
//
//	bytes.Compare(Cursor(ta, a), Cursor(tb, b)) == listOrder((ta, a), (tb, b))
//
// where listOrder is negative when (ta, a) is listed first. Cursor keys are
// themselves prefix-free, so a key may be followed by more bytes and the
// pair still decodes. Ascending encodes a byte string for ascending order
// with the same escaping (no complement), for grouping prefixes such as a
// context ID.
//
// The package has no dependencies beyond the standard library.
package desckey
