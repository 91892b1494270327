package load

import (
	"encoding/binary"
	"hash/maphash"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// idPages maps task IDs to the page where a traversal saw them, exactly,
// without a pointer per ID: a traversal of a million tasks keeps a million
// of them, and in an embedded run they share the heap with the store under
// test, whose collector would otherwise trace every one. The IDs' bytes go
// into one byte slice (no pointers to trace); a map from their hash
// (no pointers either) locates them. The rare ID whose hash another ID
// already holds goes to a small map of its own.
type idPages struct {
	seed  maphash.Seed
	at    map[uint64]uint32 // hash → offset in bytes
	bytes []byte            // per ID: page (uint32), length (uvarint), the ID
	other map[a2a.TaskID]int
	n     int
	// limit is the largest offset bytes may reach: IDs past it go to
	// other (offsets are uint32).
	limit uint64
}

func newIDPages() idPages {
	return idPages{seed: maphash.MakeSeed(), at: map[uint64]uint32{}, limit: 1<<32 - 1}
}

func (p *idPages) len() int { return p.n }

// get returns the page of id; ok is false when id was never put.
func (p *idPages) get(id a2a.TaskID) (page int, ok bool) {
	if off, ok := p.at[maphash.String(p.seed, string(id))]; ok {
		if pg, same := p.entry(off, id); same {
			return pg, true
		}
	}
	page, ok = p.other[id]
	return page, ok
}

// put records that id was seen on page. REQUIRES: id not put before.
func (p *idPages) put(id a2a.TaskID, page int) {
	p.n++
	h := maphash.String(p.seed, string(id))
	if _, taken := p.at[h]; taken || uint64(len(p.bytes)) > p.limit {
		if p.other == nil {
			p.other = map[a2a.TaskID]int{}
		}
		p.other[id] = page
		return
	}
	p.at[h] = uint32(len(p.bytes))
	p.bytes = binary.BigEndian.AppendUint32(p.bytes, uint32(page))
	p.bytes = binary.AppendUvarint(p.bytes, uint64(len(id)))
	p.bytes = append(p.bytes, id...)
}

// entry returns the page stored at off, and whether the ID stored there
// is id.
func (p *idPages) entry(off uint32, id a2a.TaskID) (int, bool) {
	b := p.bytes[off:]
	page := int(binary.BigEndian.Uint32(b))
	n, k := binary.Uvarint(b[4:])
	b = b[4+k:]
	return page, string(b[:n]) == string(id)
}
