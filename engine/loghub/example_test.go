package loghub_test

import (
	"fmt"

	"github.com/a2astore/a2astore/engine/loghub"
)

// A store wakes the watchers of a task after it commits an entry; a reader
// rereads the log when its channel fires. Wakes are coalesced and never
// block the writer.
func ExampleHub() {
	var hub loghub.Hub
	woken, stop := hub.Watch("t1")
	defer stop()

	hub.Wake("t1") // the writer, after its commit
	hub.Wake("t1") // coalesced with the first
	hub.Wake("t2") // nobody watches t2

	<-woken
	select {
	case <-woken:
		fmt.Println("woken twice")
	default:
		fmt.Println("woken once: reread the log")
	}
	// Output:
	// woken once: reread the log
}
