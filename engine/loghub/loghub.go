package loghub

import (
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Hub is the set of watches of one store. The zero value is ready to use.
type Hub struct {
	mu      sync.Mutex
	watches map[a2a.TaskID]map[chan struct{}]struct{}
}

// Watch returns a channel that receives after each Wake of id (or WakeAll)
// and the function that ends the watch.
func (h *Hub) Watch(id a2a.TaskID) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.watches == nil {
		h.watches = make(map[a2a.TaskID]map[chan struct{}]struct{})
	}
	set := h.watches[id]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		h.watches[id] = set
	}
	set[ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			delete(set, ch)
			if len(h.watches[id]) == 0 {
				delete(h.watches, id)
			}
		})
	}
}

// Wake wakes the watches of id.
func (h *Hub) Wake(id a2a.TaskID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.watches[id] {
		signal(ch)
	}
}

// WakeAll wakes every watch (after a lost notification connection, say).
func (h *Hub) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.watches {
		for ch := range set {
			signal(ch)
		}
	}
}

// Watching reports whether id has watches (a store may skip work for a
// task nobody watches).
func (h *Hub) Watching(id a2a.TaskID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watches[id]) > 0
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
