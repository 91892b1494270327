package taskcodec

import (
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// A Decoder decodes stored forms held in strings, for a page of tasks. The
// decoded values share the strings' bytes, which never change (a Go
// string is immutable), so a decoded task still shares nothing mutable
// with its stored form (L9). The messages, artifacts, parts, timestamps
// and the slices holding them are allocated in chunks shared by every
// task one Decoder decodes — a few allocations per page, not several per
// task — and each slice handed out is capped at its own length, so
// appending to one task's slice never writes into another's. Maps are
// allocated each on its own. The zero value is ready; a Decoder is not
// safe for concurrent use. The decoded tasks keep their chunks alive
// while any of them is referenced.
type Decoder struct {
	exact bool // allocate each value on its own (DecodeTask, DecodeMetadata)
	// shaped, history and artifacts are Shape's: Task builds only the
	// last history messages and, unless artifacts, no artifacts.
	shaped    bool
	history   int
	artifacts bool

	times    slab[time.Time]
	msgs     slab[a2a.Message]
	msgPtrs  slab[*a2a.Message]
	arts     slab[a2a.Artifact]
	artPtrs  slab[*a2a.Artifact]
	parts    slab[a2a.Part]
	partPtrs slab[*a2a.Part]
	strs     slab[string]
}

// Task decodes a stored task (EncodeTask's form) held in s into t.
func (d *Decoder) Task(s string, t *a2a.Task) error {
	*t = a2a.Task{}
	return decodeString(s, "task", t, d)
}

// Head decodes the fields of a stored task (EncodeTask's form) held in s
// that precede its history — ID, context ID and status, with its message —
// into t, and stops there: the history, artifacts and metadata are neither
// built nor read, so nothing after the status message is checked. It is
// for forms the caller wrote itself in this process and keeps unchanged
// (engine/memstore's bodies), where a page that returns neither history
// nor artifacts need not walk them; a form read back from storage gets
// Task, which checks it whole.
func (d *Decoder) Head(s string, t *a2a.Task) error {
	*t = a2a.Task{}
	if len(s) == 0 || s[0] != version {
		return fmt.Errorf("taskcodec: decode task head: unknown format: %w", engine.ErrInternal)
	}
	r := reader{s: s[1:], d: d}
	r.head(t)
	if r.err != nil {
		return fmt.Errorf("taskcodec: decode task head: %v: %w", r.err, engine.ErrInternal)
	}
	return nil
}

// Shape makes Task build only what a page returns (L4): the last history
// messages of each task (all when history is negative, none when 0) and
// its artifacts only when artifacts is true. What it leaves out is read
// and checked as the rest, never built: a page that asks for no history
// allocates none.
func (d *Decoder) Shape(history int, artifacts bool) {
	d.shaped, d.history, d.artifacts = true, history, artifacts
}

// Metadata decodes task metadata (EncodeMetadata's form) held in s into a
// new map (nil for none).
func (d *Decoder) Metadata(s string) (map[string]any, error) {
	if s == "" {
		return nil, nil
	}
	return decodeMetadata(s, d)
}

// slab hands out values of T from chunks that double in size (from 4 to
// 256 values), or each take on its own (exact).
type slab[T any] struct {
	buf  []T
	next int // the next chunk's size
}

// take returns n zero values of T as a slice whose capacity ends with it.
func (s *slab[T]) take(n int, exact bool) []T {
	if exact || n > 256 {
		return make([]T, n)
	}
	if cap(s.buf)-len(s.buf) < n {
		s.next = min(max(s.next*2, 4), 256)
		s.buf = make([]T, 0, max(n, s.next))
	}
	at := len(s.buf)
	s.buf = s.buf[:at+n]
	return s.buf[at : at+n : at+n]
}
