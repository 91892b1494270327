package loghub

import "testing"

func fired(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestHub(t *testing.T) {
	var h Hub
	a, stopA := h.Watch("a")
	b, stopB := h.Watch("b")
	defer stopB()
	h.Wake("a")
	h.Wake("a") // coalesced: the writer never blocks
	if !fired(a) || fired(a) || fired(b) {
		t.Fatal("Wake(a) must wake a's watch once (coalesced) and not b's")
	}
	if !h.Watching("a") {
		t.Fatal("Watching(a) false while a is watched")
	}
	h.WakeAll()
	if !fired(a) || !fired(b) {
		t.Fatal("WakeAll must wake every watch")
	}
	stopA()
	stopA() // idempotent
	if h.Watching("a") {
		t.Fatal("Watching(a) true after its only watch stopped")
	}
	h.Wake("a")
	if fired(a) {
		t.Fatal("a stopped watch was woken")
	}
}
