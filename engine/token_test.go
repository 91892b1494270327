package engine

import (
	"errors"
	"math"
	"net/url"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

func TestTokenRoundTrip(t *testing.T) { // T2, T3
	for _, c := range []Cursor{
		{0, "a"},
		{1, "\x00"},
		{math.MaxInt64, "\x00\x00id\x00"},
		{1700000000000000, "task-1"},
		{42, "\xff\xfe\xfd"},
		{7, a2a.TaskID(strings.Repeat("x", MaxIDBytes))},
	} {
		tok := EncodeToken(c)
		if url.QueryEscape(tok) != tok {
			t.Errorf("token %q is not URL-safe", tok)
		}
		got, err := DecodeToken(tok)
		if err != nil || got != c {
			t.Fatalf("DecodeToken(EncodeToken(%+v)) = %+v, %v", c, got, err)
		}
	}
}

func TestTokenInvalid(t *testing.T) { // T4
	valid := EncodeToken(Cursor{5, "abc"})
	over := EncodeToken(Cursor{5, a2a.TaskID(strings.Repeat("x", MaxIDBytes+1))})
	negTime := tokenPrefix + tokenEncoding.EncodeToString([]byte{0x80, 0, 0, 0, 0, 0, 0, 1, 'a'})
	emptyID := tokenPrefix + tokenEncoding.EncodeToString([]byte{0, 0, 0, 0, 0, 0, 0, 1})
	for _, s := range []string{
		"", "0", "1", "50", "-1", "100000", "v1", "v1.", "v2." + valid[3:],
		valid + "=", valid + "\n", valid[:3] + "\r\n" + valid[3:], valid + "AA",
		valid[:len(valid)-1] + "B", // stray trailing bits: non-canonical
		strings.ToUpper(valid[:2]) + valid[2:], " " + valid, valid + " ",
		strings.Replace(valid, "-", "+", 1) + "+/", over, negTime, emptyID,
		strings.Repeat("v1.AAAA", 1000),
	} {
		_, err := DecodeToken(s)
		if err != ErrInvalidPageToken {
			t.Errorf("DecodeToken(%q) = %v, want ErrInvalidPageToken itself", s, err)
		}
	}
	if !errors.Is(ErrInvalidPageToken, ErrInvalidArgument) {
		t.Fatal("ErrInvalidPageToken is not an ErrInvalidArgument")
	}
}

func FuzzToken(f *testing.F) {
	for _, s := range []string{"", "0", "1", "50", "-1", "v1.", "v1.AAAAAAAAAAE", "v1.AAAAAAAAAAEA",
		EncodeToken(Cursor{0, "\x00"}), EncodeToken(Cursor{math.MaxInt64, "\xff"}), "v1.AAAA\r\nAAAAAAE"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := DecodeToken(s)
		if err != nil {
			if err != ErrInvalidPageToken {
				t.Fatalf("error %v is not the generic token error", err)
			} // the generic error's message is a constant: it cannot echo s
			return
		}
		if c.UpdatedAt < 0 || len(c.ID) == 0 || len(c.ID) > MaxIDBytes {
			t.Fatalf("decoded invalid cursor %+v", c)
		}
		if re := EncodeToken(c); re != s {
			t.Fatalf("non-canonical: %q decodes to %+v which encodes to %q", s, c, re)
		}
	})
}

func FuzzTokenCursor(f *testing.F) {
	f.Add(int64(0), "\x00")
	f.Add(int64(math.MaxInt64), "\xff\x00")
	f.Fuzz(func(t *testing.T, at int64, id string) {
		c := Cursor{at, a2a.TaskID(id)}
		if at < 0 || len(id) == 0 || len(id) > MaxIDBytes {
			return
		}
		got, err := DecodeToken(EncodeToken(c))
		if err != nil || got != c {
			t.Fatalf("round trip of %+v: %+v, %v", c, got, err)
		}
	})
}
