package desckey

import (
	"bytes"
	"math"
	"testing"
)

// listOrder is S6: time descending, then ID descending in byte order.
func listOrder(ta int64, a []byte, tb int64, b []byte) int {
	switch {
	case ta > tb:
		return -1
	case ta < tb:
		return 1
	}
	return -bytes.Compare(a, b)
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func TestCursorOrderTable(t *testing.T) {
	// Each row is listed before the next one.
	rows := []struct {
		t  int64
		id string
	}{
		{math.MaxInt64, "\xff\xff"},
		{math.MaxInt64, "\xff"},
		{math.MaxInt64, "b"},
		{math.MaxInt64, "a\xff"},
		{math.MaxInt64, "a\x01"},
		{math.MaxInt64, "a\x00\x00"},
		{math.MaxInt64, "a\x00"},
		{math.MaxInt64, "a"},
		{math.MaxInt64, "\x00\x00"},
		{math.MaxInt64, "\x00"},
		{2, "a"},
		{1, "z"},
		{1, "a"},
		{0, "\xff"},
		{0, "\x00"},
	}
	for i := range rows {
		for j := range rows {
			a := AppendCursor(nil, rows[i].t, []byte(rows[i].id))
			b := AppendCursor(nil, rows[j].t, []byte(rows[j].id))
			want := sign(i - j)
			if got := sign(bytes.Compare(a, b)); got != want {
				t.Errorf("compare(%d %q, %d %q) = %d, want %d", rows[i].t, rows[i].id, rows[j].t, rows[j].id, got, want)
			}
		}
	}
}

func TestDecodeCorrupt(t *testing.T) {
	for _, b := range [][]byte{
		nil,
		{1, 2, 3},
		AppendCursor(nil, 5, []byte("ab"))[:10], // no terminator
		append(AppendCursor(nil, 5, nil)[:8], 0xFF, 0x33),     // bad escape
		append([]byte{0x7F, 0, 0, 0, 0, 0, 0, 0}, 0xFF, 0xFE), // time > MaxInt64
	} {
		if _, _, _, err := DecodeCursor(b); err == nil {
			t.Errorf("DecodeCursor(%x) succeeded", b)
		}
	}
	if _, _, err := DecodeAscending([]byte{'a', 0, 7}); err == nil {
		t.Error("DecodeAscending accepted a bad escape")
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want []byte }{
		{[]byte("g"), []byte("h")},
		{[]byte{'c', 0, 1}, []byte{'c', 0, 2}},
		{[]byte{'a', 0xFF, 0xFF}, []byte{'b'}},
		{[]byte{0xFF}, nil},
	} {
		if got := PrefixEnd(c.in); !bytes.Equal(got, c.want) {
			t.Errorf("PrefixEnd(%x) = %x, want %x", c.in, got, c.want)
		}
	}
}

// FuzzCursorOrder checks that key order is list order and that keys round
// trip, with trailing bytes left alone.
func FuzzCursorOrder(f *testing.F) {
	f.Add(int64(0), []byte("a"), int64(0), []byte("a\x00"))
	f.Add(int64(1), []byte("\x00\x00\x00"), int64(1), []byte("\x00\x00"))
	f.Add(int64(math.MaxInt64), []byte("\xff"), int64(math.MaxInt64), []byte("\xff\x00"))
	f.Fuzz(func(t *testing.T, ta int64, a []byte, tb int64, b []byte) {
		ta, tb = ta&math.MaxInt64, tb&math.MaxInt64
		ka := AppendCursor(nil, ta, a)
		kb := AppendCursor(nil, tb, b)
		if got, want := sign(bytes.Compare(ka, kb)), listOrder(ta, a, tb, b); got != want {
			t.Fatalf("compare(%d %q, %d %q) = %d, want %d", ta, a, tb, b, got, want)
		}
		gt, gid, rest, err := DecodeCursor(append(ka, b...))
		if err != nil || gt != ta || !bytes.Equal(gid, a) || !bytes.Equal(rest, b) {
			t.Fatalf("round trip of %d %q: %d %q rest %q err %v", ta, a, gt, gid, rest, err)
		}
		aa, ab := AppendAscending(nil, a), AppendAscending(nil, b)
		if got, want := sign(bytes.Compare(aa, ab)), bytes.Compare(a, b); got != want {
			t.Fatalf("ascending compare(%q, %q) = %d, want %d", a, b, got, want)
		}
		if !bytes.Equal(a, b) && (bytes.HasPrefix(aa, ab) || bytes.HasPrefix(ab, aa)) {
			t.Fatalf("ascending encodings of %q and %q are not prefix-free", a, b)
		}
		s, rest, err := DecodeAscending(append(aa, kb...))
		if err != nil || !bytes.Equal(s, a) || !bytes.Equal(rest, kb) {
			t.Fatalf("ascending round trip of %q: %q rest %q err %v", a, s, rest, err)
		}
	})
}

// FuzzDecodeCursor checks that decoding arbitrary bytes never panics and
// accepts only canonical encodings.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(AppendCursor(nil, 7, []byte("x\x00y")))
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0xFF, 0xFE})
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, id, rest, err := DecodeCursor(b)
		if err != nil {
			return
		}
		if enc := AppendCursor(nil, ts, id); !bytes.Equal(enc, b[:len(b)-len(rest)]) {
			t.Fatalf("decode(%x) = %d %q, which encodes as %x", b, ts, id, enc)
		}
	})
}

// BenchmarkDecodeCursor: a list-order key of a 36-byte ID (a UUID, the
// usual task ID) decoded into a reused buffer, as a page decodes each
// index entry's key.
func BenchmarkDecodeCursor(b *testing.B) {
	key := AppendCursor(nil, 1_700_000_000_000_000_000, []byte("0192a3b4-c5d6-47e8-9f01-23456789abcd"))
	var buf []byte
	for b.Loop() {
		_, id, _, err := AppendDecodedCursor(buf[:0], key)
		if err != nil {
			b.Fatal(err)
		}
		buf = id
	}
}
