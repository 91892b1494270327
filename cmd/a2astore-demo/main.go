// Command a2astore-demo builds an in-memory a2astore, writes generated
// tasks, updates some of them while walking the list page by page, and
// prints what the traversal saw and what it cost. It is the quick "does it
// work here" run; the load generator is the fuller one.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/taskgen"
)

func main() {
	n := flag.Int("n", 100_000, "tasks to create")
	page := flag.Int("page", 50, "page size (1..100)")
	flag.Parse()
	if err := run(*n, *page); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(n, pageSize int) error {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	defer store.Close()
	gen := taskgen.New(taskgen.Shape{})

	start := time.Now()
	for i := range n {
		if _, err := store.Create(ctx, gen.Task(i)); err != nil {
			return err
		}
	}
	created := time.Since(start)
	fmt.Printf("created %d tasks in %v (%.0f tasks/s)\n", n, created.Round(time.Millisecond), float64(n)/created.Seconds())

	// Walk every page; between pages, append a message to a task not yet
	// seen, which moves it to the head: the live traversal (L7) then skips
	// it rather than showing it twice.
	req := &engine.ListRequest{PageSize: pageSize, IncludeTotalSize: true, Projection: engine.ProjectionLight}
	seen := make(map[string]bool, n)
	moved := make(map[string]bool)
	pages, examined := 0, 0
	var prev *engine.Cursor
	start = time.Now()
	for {
		resp, err := store.List(ctx, req)
		if err != nil {
			return err
		}
		pages++
		examined += resp.Stats.Examined
		for i, t := range resp.Tasks {
			c := resp.TaskCursors[i]
			if prev != nil && c.Compare(*prev) <= 0 {
				return fmt.Errorf("cursors do not descend at page %d", pages)
			}
			if seen[string(t.ID)] {
				return fmt.Errorf("task %s seen twice", t.ID)
			}
			seen[string(t.ID)] = true
			prev = &c
		}
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
		victim := taskgen.TaskID((pages * 7919) % n)
		if !seen[string(victim)] {
			if _, err := store.AppendHistory(ctx, victim, gen.Message(victim, pages)); err != nil {
				return err
			}
			moved[string(victim)] = true
		}
	}
	walked := time.Since(start)
	fmt.Printf("walked %d pages of %d in %v (%.1f us/page, %.1f entries examined/page)\n",
		pages, pageSize, walked.Round(time.Millisecond), float64(walked.Microseconds())/float64(pages), float64(examined)/float64(pages))
	fmt.Printf("saw %d distinct tasks; %d moved to the head during the walk and were skipped; no repeats, cursors strictly descending\n",
		len(seen), len(moved))
	if len(seen)+len(moved) != n {
		return fmt.Errorf("traversal saw %d tasks and moved %d of %d: untouched tasks were lost", len(seen), len(moved), n)
	}
	return nil
}
