package load

import (
	"fmt"
	"hash/maphash"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

func TestIDPages(t *testing.T) {
	p := newIDPages()
	for i := range 1000 {
		p.put(a2a.TaskID(fmt.Sprint("task-", i)), i/50+1)
	}
	for i := range 1000 {
		if page, ok := p.get(a2a.TaskID(fmt.Sprint("task-", i))); !ok || page != i/50+1 {
			t.Fatalf("task-%d: page %d %v, want %d", i, page, ok, i/50+1)
		}
	}
	for _, id := range []a2a.TaskID{"task-1000", "", "task-", "task-10\x00"} {
		if page, ok := p.get(id); ok {
			t.Fatalf("%q: found on page %d, never put", id, page)
		}
	}
	if p.len() != 1000 {
		t.Fatalf("len %d, want 1000", p.len())
	}
}

// Two IDs whose hashes collide: the second is kept apart, and each is
// found with its own page, never the other's.
func TestIDPagesCollision(t *testing.T) {
	p := newIDPages()
	p.put("a", 1)
	// Make "b" hash where "a" is stored, as a collision would.
	p.at[maphash.String(p.seed, "b")] = p.at[maphash.String(p.seed, "a")]
	if _, ok := p.get("b"); ok {
		t.Fatal(`"b" found before it was put: the stored ID was not compared`)
	}
	p.put("b", 2)
	for id, want := range map[a2a.TaskID]int{"a": 1, "b": 2} {
		if page, ok := p.get(id); !ok || page != want {
			t.Fatalf("%q: page %d %v, want %d", id, page, ok, want)
		}
	}
}

// IDs put once the byte slice has passed its offset limit go to the map
// apart, and every ID is still found with its page (without the limit,
// offsets past 2^32 would wrap and point at other IDs).
func TestIDPagesOffsetLimit(t *testing.T) {
	p := newIDPages()
	p.limit = 40
	for i := range 20 {
		p.put(a2a.TaskID(fmt.Sprint("task-", i)), i+1)
	}
	if len(p.bytes) > 60 || len(p.other) == 0 {
		t.Fatalf("%d bytes, %d IDs apart: the limit was not applied", len(p.bytes), len(p.other))
	}
	for i := range 20 {
		if page, ok := p.get(a2a.TaskID(fmt.Sprint("task-", i))); !ok || page != i+1 {
			t.Fatalf("task-%d: page %d %v, want %d", i, page, ok, i+1)
		}
	}
}
