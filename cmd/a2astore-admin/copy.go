package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/pebblestore"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/a2astore/a2astore/pushdelivery"
)

// copy moves every task between two persistent backends exactly as
// stored (SPEC X1): ID, storage update time (so the list order), revision,
// owner, content, log, and push configurations with their delivery state.
// It reads the source in list order (engine.Exporter) and writes it in
// batches (engine.Importer: Pebble batches, PostgreSQL COPY), each batch
// all or nothing, so the target always holds a prefix of the source in
// list order: a rerun resumes after the target's oldest task. The push
// configurations of a batch are saved after it (an upsert: the rerun
// saves again those of the target's oldest engine.MaxExport tasks that
// differ, whatever -batch the stopped copy ran with; with -live those of
// every task, whose delivery state the source's push worker may have
// moved on since). It ends with a verification that
// traverses both stores in list order and compares every task, log and
// configuration.

// endpoint is one side of a copy: a backend and where it lives.
type endpoint struct {
	backend, pebbleDir, pgDSN, pgSchema, pushDir string
}

func endpointFlags(fs *flag.FlagSet, e *endpoint, side, what string) {
	fs.StringVar(&e.backend, side, "", what+" backend: pebble (needs -"+side+"-pebble-dir) or pg (needs -"+side+"-pg-dsn)")
	fs.StringVar(&e.pebbleDir, side+"-pebble-dir", "", what+": Pebble data directory")
	fs.StringVar(&e.pgDSN, side+"-pg-dsn", "", what+": PostgreSQL connection string")
	fs.StringVar(&e.pgSchema, side+"-pg-schema", "public", what+": PostgreSQL schema holding a2a_tasks")
	fs.StringVar(&e.pushDir, side+"-push-dir", "", what+": Pebble push outbox directory (default: -"+side+"-pebble-dir with .push appended, as a2astore-server)")
}

func copyFlags(fs *flag.FlagSet, o *options) {
	endpointFlags(fs, &o.src, "from", "source")
	endpointFlags(fs, &o.dst, "to", "target")
	fs.IntVar(&o.batch, "batch", 1000, fmt.Sprintf("tasks per batch written (1..%d)", engine.MaxExport))
	fs.BoolVar(&o.live, "live", false, "copy a source that servers are writing to: catch up with its writes at the end instead of refusing (deletes are not copied)")
}

// copyStore is what copy needs of a store.
type copyStore interface {
	engine.Store
	engine.Exporter
	engine.Importer
	Close() error
}

// side is an opened endpoint.
type side struct {
	e      *endpoint
	what   string // "source" or "target"
	store  copyStore
	pool   *pgxpool.Pool       // pg only
	outbox pushdelivery.Outbox // nil: no push configurations
	close  []func()
}

func (s *side) Close() {
	for i := len(s.close) - 1; i >= 0; i-- {
		s.close[i]()
	}
}

// String names the side's store for messages.
func (s *side) String() string {
	if s.e.backend == "pebble" {
		return "pebble " + s.e.pebbleDir
	}
	return "pg schema " + s.e.pgSchema
}

// check validates the endpoint's flags.
func (e *endpoint) check(side string) error {
	switch e.backend {
	case "":
		return usagef("-%s is required (pebble or pg)", side)
	case "pebble":
		if e.pebbleDir == "" {
			return usagef("-%s-pebble-dir is required with -%s pebble", side, side)
		}
	case "pg":
		if e.pgDSN == "" {
			return usagef("-%s-pg-dsn is required with -%s pg", side, side)
		}
	case "mem":
		return usagef("-%s mem: the memory backend lives in a server's process; copy works between pebble and pg", side)
	default:
		return usagef("unknown backend -%s %q (want pebble or pg)", side, e.backend)
	}
	return nil
}

// outboxDir is the Pebble push outbox's directory.
func (e *endpoint) outboxDir() string {
	if e.pushDir != "" {
		return e.pushDir
	}
	return filepath.Clean(e.pebbleDir) + ".push"
}

// sameStore reports whether two endpoints name the same store.
func sameStore(a, b *endpoint) bool {
	if a.backend != b.backend {
		return false
	}
	if a.backend == "pebble" {
		x, errX := filepath.Abs(a.pebbleDir)
		y, errY := filepath.Abs(b.pebbleDir)
		return errX == nil && errY == nil && x == y
	}
	return a.pgDSN == b.pgDSN && a.pgSchema == b.pgSchema
}

// logApplied reports whether the schema holds the task log table.
func logApplied(migs []pgstore.Migration) bool {
	for _, m := range migs {
		if m.File == pgstore.LogMigrationFile {
			return m.Applied
		}
	}
	return false
}

// tableExists reports whether schema holds a table named name.
func tableExists(ctx context.Context, pool *pgxpool.Pool, schema, name string) (bool, error) {
	var exists bool
	err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{schema, name}.Sanitize()).Scan(&exists)
	return exists, err
}

// openSide opens endpoint e's side of a copy with open, closing what open
// left opened when it fails.
func openSide(e *endpoint, what string, open func(s *side) error) (*side, error) {
	s := &side{e: e, what: what}
	if err := open(s); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openStore opens the existing Pebble store of the side (openPebble).
func (s *side) openStore() error {
	st, err := openPebble(s.e.pebbleDir)
	if err != nil {
		return err
	}
	s.useStore(st)
	return nil
}

func (s *side) useStore(st copyStore) {
	s.store = st
	s.close = append(s.close, func() { _ = st.Close() })
}

// connect opens a pool to the side's database.
func (s *side) connect(ctx context.Context) error {
	pool, err := pgPool(ctx, s.e.pgDSN)
	if err != nil {
		return err
	}
	s.pool = pool
	s.close = append(s.close, pool.Close)
	return nil
}

// openPG opens the store in the side's schema, changing nothing (an
// externally managed schema, openPG).
func (s *side) openPG(ctx context.Context) ([]pgstore.Migration, error) {
	st, migs, err := openPG(ctx, s.pool, s.e.pgSchema)
	if err != nil {
		return migs, err
	}
	s.useStore(st)
	return migs, nil
}

// openSource opens the source without changing it.
func openSource(ctx context.Context, e *endpoint) (*side, error) {
	return openSide(e, "source", func(s *side) error {
		if e.backend == "pebble" {
			if err := s.openStore(); err != nil {
				return err
			}
			if dir := e.outboxDir(); hasPebble(dir) {
				ob, err := pushdelivery.OpenPebble(dir, s.store, pushdelivery.LocalOptions{Logger: pebblelog.Quiet{}})
				if err != nil {
					return fmt.Errorf("source push outbox: %w", err)
				}
				s.outbox = ob
				s.close = append(s.close, func() { _ = ob.Close() })
			}
			return nil
		}
		if err := s.connect(ctx); err != nil {
			return err
		}
		if migs, err := s.openPG(ctx); err != nil {
			if migs != nil && !migs[0].Applied {
				return usagef("source %s holds no task store: %v", e.pgSchema, err)
			}
			return err
		}
		push, err := tableExists(ctx, s.pool, e.pgSchema, "a2a_push_configs")
		if err != nil || !push {
			return err
		}
		if s.outbox, err = pushdelivery.NewPG(ctx, s.pool, pushdelivery.PGOptions{Schema: e.pgSchema}); err != nil {
			return fmt.Errorf("source push outbox: %w", err)
		}
		return nil
	})
}

// openTarget opens the target when it holds a store, as it is; a
// missing one is created only when the copy writes (side.create), so a
// copy refused before its first batch leaves nothing behind. It refuses,
// changing nothing, an existing PostgreSQL schema without a migration the
// store needs.
func openTarget(ctx context.Context, e *endpoint) (*side, error) {
	return openSide(e, "target", func(s *side) error {
		if e.backend == "pebble" {
			if !hasPebble(e.pebbleDir) {
				return nil // runCopy checked that it is missing or empty
			}
			return s.openStore()
		}
		if err := s.connect(ctx); err != nil {
			return err
		}
		exists, err := tableExists(ctx, s.pool, e.pgSchema, "a2a_tasks")
		if err != nil || !exists {
			return err
		}
		migs, err := s.openPG(ctx)
		switch {
		case err != nil && migs != nil:
			return usagef("target %v", err)
		case err != nil:
			return err
		case !logApplied(migs):
			return usagef("target schema %s has no task log table: run migrate up -pg-dsn ... -pg-schema %s first", e.pgSchema, e.pgSchema)
		}
		return nil
	})
}

// create creates the target's store (with the task log), and its push
// outbox when withOutbox.
func (s *side) create(ctx context.Context, withOutbox bool) error {
	var st copyStore
	var err error
	switch s.e.backend {
	case "pebble":
		st, err = pebblestore.Open(s.e.pebbleDir, pebblestore.Options{Log: true, Logger: pebblelog.Quiet{}})
	case "pg":
		st, err = pgstore.New(ctx, s.pool, pgstore.Options{Schema: s.e.pgSchema, Log: true, CountRollupInterval: -1})
	}
	if err != nil {
		return fmt.Errorf("create the target: %w", err)
	}
	s.useStore(st)
	if withOutbox {
		return s.openOutbox(ctx)
	}
	return nil
}

// openOutbox opens (creating) the target's push outbox.
func (s *side) openOutbox(ctx context.Context) error {
	switch s.e.backend {
	case "pebble":
		ob, err := pushdelivery.OpenPebble(s.e.outboxDir(), s.store, pushdelivery.LocalOptions{Logger: pebblelog.Quiet{}})
		if err != nil {
			return fmt.Errorf("target push outbox: %w", err)
		}
		s.outbox = ob
		s.close = append(s.close, func() { _ = ob.Close() })
	case "pg":
		ob, err := pushdelivery.NewPG(ctx, s.pool, pushdelivery.PGOptions{Schema: s.e.pgSchema})
		if err != nil {
			return fmt.Errorf("target push outbox: %w", err)
		}
		s.outbox = ob
	}
	return nil
}

// copyHook, when set (tests), runs at each step of a copy: "exported"
// (a batch read from the source), "imported" (written to the target, its
// push configurations not yet), "saved" (its push configurations too). An
// error stops the copy there, as an interruption would.
var copyHook func(step string, batch int) error

func hook(step string, batch int) error {
	if copyHook == nil {
		return nil
	}
	return copyHook(step, batch)
}

// headOf is a store's newest task and task count: what a write moves.
type headOf struct {
	cursor   engine.Cursor
	revision int64
	count    int
}

func readHead(ctx context.Context, s copyStore) (headOf, error) {
	n, err := taskCount(ctx, s)
	if err != nil {
		return headOf{}, err
	}
	top, err := s.Export(ctx, nil, 1)
	if err != nil || len(top) == 0 {
		return headOf{count: n}, err
	}
	return headOf{cursor: top[0].Cursor, revision: top[0].Revision, count: n}, nil
}

func runCopy(ctx context.Context, o *options, out io.Writer) error {
	if err := o.src.check("from"); err != nil {
		return err
	}
	if err := o.dst.check("to"); err != nil {
		return err
	}
	if o.batch < 1 || o.batch > engine.MaxExport {
		return usagef("-batch %d: want 1..%d", o.batch, engine.MaxExport)
	}
	if sameStore(&o.src, &o.dst) {
		return usagef("-from and -to name the same store")
	}
	if o.dst.backend == "pebble" && !hasPebble(o.dst.pebbleDir) {
		if err := emptyOrMissing(o.dst.pebbleDir, "-to-pebble-dir"); err != nil {
			return err // before the source is opened: nothing is touched
		}
	}
	c, err := startCopy(ctx, o, out)
	if err != nil {
		return err
	}
	defer c.close()
	if err := c.run(ctx); err != nil {
		return err
	}
	return c.verify(ctx)
}

// startCopy opens both stores and reads where the source stands.
func startCopy(ctx context.Context, o *options, out io.Writer) (*copier, error) {
	src, err := openSource(ctx, &o.src)
	if err != nil {
		return nil, err
	}
	start, err := readHead(ctx, src.store)
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("read the source: %w", err)
	}
	dst, err := openTarget(ctx, &o.dst)
	if err != nil {
		src.Close()
		return nil, err
	}
	if src.outbox != nil && dst.store != nil {
		if err := dst.openOutbox(ctx); err != nil {
			dst.Close()
			src.Close()
			return nil, err
		}
	}
	return &copier{src: src, dst: dst, o: o, out: out, start: start}, nil
}

func (c *copier) close() {
	c.dst.Close()
	c.src.Close()
}

// copier is one run of copy.
type copier struct {
	src, dst *side
	o        *options
	out      io.Writer
	start    headOf // the source when the copy began
	copied   int    // tasks written by this run
	had      int    // tasks the target held when this run began
	began    time.Time
	shown    time.Time // the last progress line
	// shownDone is the tasks the last progress line counted.
	shownDone int
}

func (c *copier) run(ctx context.Context) error {
	c.began = time.Now()
	// The last batches a stopped copy wrote: at most MaxExport tasks,
	// whatever -batch it ran with.
	var tail []engine.Cursor
	var err error
	if c.dst.store != nil {
		if tail, err = c.dst.store.Tail(ctx, engine.MaxExport); err != nil {
			return fmt.Errorf("read the target: %w", err)
		}
	}
	var after *engine.Cursor
	if len(tail) > 0 {
		if err := c.resumable(ctx, tail[len(tail)-1]); err != nil {
			return err
		}
		if c.had, err = taskCount(ctx, c.dst.store); err != nil {
			return err
		}
		after = &tail[len(tail)-1]
		fmt.Fprintf(c.out, "resuming after task %q (%d of %d tasks in the target)\n", after.ID, c.had, c.start.count)
		redo := c.redoConfigs
		if c.o.live {
			// A live source's deliveries move on after their tasks were
			// copied (verify's advice is this rerun): every task's.
			redo = func(ctx context.Context, _ []engine.Cursor) error { return c.redoEveryConfig(ctx) }
		}
		if err := redo(ctx, tail); err != nil {
			return err
		}
	}
	for batch := 0; ; batch++ {
		page, err := c.src.store.Export(ctx, after, c.o.batch)
		if err != nil {
			return fmt.Errorf("read the source: %w", err)
		}
		if len(page) == 0 {
			break
		}
		if err := hook("exported", batch); err != nil {
			return err
		}
		if err := c.stillQuiet(ctx); err != nil {
			return err
		}
		if c.dst.store == nil {
			if err := c.dst.create(ctx, c.src.outbox != nil); err != nil {
				return err
			}
		}
		if err := c.dst.store.Import(ctx, page); err != nil {
			if errors.Is(err, engine.ErrAlreadyExists) {
				return fmt.Errorf("write to the target: %w (is something else writing to it?)", err)
			}
			return fmt.Errorf("write to the target: %w", err)
		}
		c.copied += len(page)
		if err := hook("imported", batch); err != nil {
			return err
		}
		if err := c.copyConfigs(ctx, page, false); err != nil {
			return err
		}
		if err := hook("saved", batch); err != nil {
			return err
		}
		after = &page[len(page)-1].Cursor
		c.progress(false)
		if len(page) < c.o.batch {
			break
		}
	}
	if c.dst.store == nil { // an empty source: its copy is an empty store
		if err := c.dst.create(ctx, c.src.outbox != nil); err != nil {
			return err
		}
	}
	c.progress(true)
	if c.o.live {
		return c.catchUp(ctx)
	}
	return nil
}

// progress prints a progress line at most once a second, and the last.
func (c *copier) progress(last bool) {
	now := time.Now()
	done := c.had + c.copied
	if (!last && now.Sub(c.shown) < time.Second) || (last && done == c.shownDone && !c.shown.IsZero()) {
		return
	}
	c.shown, c.shownDone = now, done
	pct := 100.0
	if c.start.count > 0 {
		pct = 100 * float64(done) / float64(c.start.count)
	}
	rate := float64(c.copied) / max(now.Sub(c.began).Seconds(), 1e-3)
	fmt.Fprintf(c.out, "copied %d/%d tasks (%.1f%%), %.0f tasks/s\n", done, c.start.count, pct, rate)
}

// resumable fails unless the target, holding tasks down to last, is a
// copy of the source that stopped there: its newest and its oldest task
// are the source's, at the same place and revision (with -live the
// source may have moved them on since).
func (c *copier) resumable(ctx context.Context, last engine.Cursor) error {
	top, err := c.dst.store.Export(ctx, nil, 1)
	if err != nil || len(top) == 0 {
		return fmt.Errorf("read the target's newest task: %v", err)
	}
	for _, cur := range []engine.Cursor{top[0].Cursor, last} {
		in, err := c.dst.store.Get(ctx, cur.ID)
		if err != nil {
			return fmt.Errorf("read the target: %w", err)
		}
		if err := c.sameInSource(ctx, in); err != nil {
			return usagef("target %v is not empty and not a copy of source %v that can be resumed: %v; copy into an empty target", c.dst, c.src, err)
		}
	}
	if !c.o.live && top[0].Cursor != c.start.cursor {
		return usagef("source %v was written to since the copy into %v began (its newest task is %q, the copy's %q): copy with -live to catch up, or into an empty target",
			c.src, c.dst, c.start.cursor.ID, top[0].Cursor.ID)
	}
	return nil
}

// sameInSource fails unless in (a target task) is in the source as it is
// (with -live: at the same or a later revision, of the same owner).
func (c *copier) sameInSource(ctx context.Context, in engine.Record) error {
	was, err := c.src.store.Get(ctx, in.Task.ID)
	if errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("task %q is not in the source", in.Task.ID)
	}
	if err != nil {
		return err
	}
	switch {
	case was.Owner != in.Owner:
		return fmt.Errorf("task %q has another owner in the source", in.Task.ID)
	case c.o.live && was.Revision >= in.Revision:
		return nil
	case was.Cursor != in.Cursor || was.Revision != in.Revision:
		return fmt.Errorf("task %q is at revision %d, time %d in the source, %d, %d in the target",
			in.Task.ID, was.Revision, was.Cursor.UpdatedAt, in.Revision, in.Cursor.UpdatedAt)
	}
	return nil
}

// stillQuiet fails, without -live, once the source has moved since the
// copy began: with usage status while this run has written nothing (the
// target is as it was), else as a failure that a rerun resumes.
func (c *copier) stillQuiet(ctx context.Context) error {
	if c.o.live {
		return nil
	}
	now, err := readHead(ctx, c.src.store)
	if err != nil {
		return fmt.Errorf("read the source: %w", err)
	}
	if now == c.start {
		return nil
	}
	msg := fmt.Sprintf("source %v is being written to (its newest task or its task count moved: %d tasks, newest %q at revision %d, were %d, %q at %d)",
		c.src, now.count, now.cursor.ID, now.revision, c.start.count, c.start.cursor.ID, c.start.revision)
	if c.copied == 0 {
		return usagef("%s: stop its writers, or copy with -live; nothing was written", msg)
	}
	return fmt.Errorf("%s after %d tasks were copied: stop its writers and run copy again with -live to catch up", msg, c.had+c.copied)
}

// copyConfigs saves the push configurations of tasks in the target, with
// their delivery state (Save keeps an existing record's); with redo it
// saves only those the target does not hold as they are. Only the
// configurations that serve the task in the source go: not those of an
// earlier incarnation of its ID not removed yet (SPEC N1; the target
// has no mark of that deletion, so they would serve the task there).
// Each is saved for the task's incarnation in the target.
func (c *copier) copyConfigs(ctx context.Context, tasks []engine.StoredTask, redo bool) error {
	if c.src.outbox == nil {
		return nil
	}
	for i := range tasks {
		recs, err := liveConfigs(ctx, c.src, tasks[i].Task.ID)
		if err != nil {
			return err
		}
		var inc int64
		if len(recs) > 0 {
			if inc, err = pushdelivery.Incarnation(ctx, c.dst.store, tasks[i].Task.ID); err != nil {
				return fmt.Errorf("target: %w", err)
			}
		}
		for _, r := range recs {
			r.Incarnation = inc
			if redo {
				had, err := c.dst.outbox.Get(ctx, r.TaskID, r.Config.ID)
				if err == nil && canonRecord(had) == canonRecord(r) {
					continue
				}
				// Save keeps an existing record's delivery state: one that
				// differs goes first, so that r is inserted as given.
				if err == nil {
					if err := c.dst.outbox.Delete(ctx, r.TaskID, r.Config.ID); err != nil {
						return fmt.Errorf("write push config %q of task %q: %w", r.Config.ID, r.TaskID, err)
					}
				}
			}
			if err := c.dst.outbox.Save(ctx, r); err != nil {
				return fmt.Errorf("write push config %q of task %q: %w", r.Config.ID, r.TaskID, err)
			}
		}
	}
	return nil
}

// redoConfigs saves again the push configurations of the tasks at tail,
// the last batches a stopped copy wrote, whose configurations may not all
// have been saved.
func (c *copier) redoConfigs(ctx context.Context, tail []engine.Cursor) error {
	if c.src.outbox == nil {
		return nil
	}
	tasks := make([]engine.StoredTask, len(tail))
	for i, cur := range tail {
		tasks[i].Task = &a2a.Task{ID: cur.ID}
	}
	return c.copyConfigs(ctx, tasks, true)
}

// redoEveryConfig saves again the push configurations of every task in
// the target that it does not hold as the source does (-live: a source
// whose push worker ran since its tasks were copied).
func (c *copier) redoEveryConfig(ctx context.Context) error {
	if c.src.outbox == nil {
		return nil
	}
	var after *engine.Cursor
	for {
		page, err := c.dst.store.Export(ctx, after, c.o.batch)
		if err != nil {
			return fmt.Errorf("read the target: %w", err)
		}
		if err := c.copyConfigs(ctx, page, true); err != nil {
			return err
		}
		if len(page) < c.o.batch {
			return nil
		}
		after = &page[len(page)-1].Cursor
	}
}

// catchUp (-live) copies the tasks the source wrote since the target's
// newest: they are above it in list order. They are applied oldest first
// (a task the target holds is replaced), so that a copy stopped halfway
// leaves the target's newest task below every one not yet applied, and a
// rerun catches them up. Deletes in the source are not copied.
func (c *copier) catchUp(ctx context.Context) error {
	for pass := 0; pass < 3; pass++ {
		top, err := c.dst.store.Export(ctx, nil, 1)
		if err != nil {
			return fmt.Errorf("read the target: %w", err)
		}
		var bound *engine.Cursor
		if len(top) > 0 {
			bound = &top[0].Cursor
		}
		var news []engine.StoredTask
		var after *engine.Cursor
	read:
		for {
			page, err := c.src.store.Export(ctx, after, c.o.batch)
			if err != nil {
				return fmt.Errorf("read the source: %w", err)
			}
			for _, st := range page {
				if bound != nil && st.Cursor.Compare(*bound) >= 0 {
					break read
				}
				news = append(news, st)
			}
			if len(page) < c.o.batch {
				break
			}
			after = &page[len(page)-1].Cursor
		}
		if len(news) == 0 {
			return nil
		}
		for i := len(news) - 1; i >= 0; i-- {
			st := news[i]
			if err := c.dst.store.Delete(ctx, st.Task.ID); err != nil && !errors.Is(err, engine.ErrNotFound) {
				return fmt.Errorf("write to the target: %w", err)
			}
			if err := c.dst.store.Import(ctx, []engine.StoredTask{st}); err != nil {
				return fmt.Errorf("write to the target: %w", err)
			}
			if err := c.copyConfigs(ctx, news[i:i+1], false); err != nil {
				return err
			}
		}
		fmt.Fprintf(c.out, "caught up with %d tasks the source wrote during the copy\n", len(news))
	}
	return nil
}

// maxDiffs bounds the differences verify reports.
const maxDiffs = 10

// verify traverses both stores in list order and compares every task —
// cursor, revision, owner, content — its log and its push configurations.
func (c *copier) verify(ctx context.Context) error {
	var diffs []string
	differ := func(format string, args ...any) {
		diffs = append(diffs, fmt.Sprintf(format, args...))
	}
	var afterA, afterB *engine.Cursor
	n := 0
	for len(diffs) < maxDiffs {
		a, err := c.src.store.Export(ctx, afterA, c.o.batch)
		if err != nil {
			return fmt.Errorf("verify: read the source: %w", err)
		}
		b, err := c.dst.store.Export(ctx, afterB, c.o.batch)
		if err != nil {
			return fmt.Errorf("verify: read the target: %w", err)
		}
		for i := range min(len(a), len(b)) {
			if a[i].Cursor != b[i].Cursor {
				differ("at position %d: task %q at time %d in the source, %q at %d in the target",
					n+i+1, a[i].Cursor.ID, a[i].Cursor.UpdatedAt, b[i].Cursor.ID, b[i].Cursor.UpdatedAt)
				break
			}
			if d := sameTask(&a[i], &b[i]); d != "" {
				differ("task %q: %s", a[i].Task.ID, d)
			}
			if d, err := c.sameConfigs(ctx, a[i].Task.ID); err != nil {
				return err
			} else if d != "" {
				differ("task %q: push configs: %s", a[i].Task.ID, d)
			}
		}
		if len(diffs) > 0 {
			break
		}
		n += min(len(a), len(b))
		switch {
		case len(a) > len(b):
			differ("the source has task %q at position %d, the target ends before it", a[len(b)].Task.ID, n+1)
		case len(b) > len(a):
			differ("the target has task %q at position %d, the source ends before it", b[len(a)].Task.ID, n+1)
		}
		if len(a) < c.o.batch || len(diffs) > 0 {
			break
		}
		afterA, afterB = &a[len(a)-1].Cursor, &b[len(b)-1].Cursor
	}
	if len(diffs) > 0 {
		for _, d := range diffs {
			fmt.Fprintf(c.out, "DIFF  %s\n", d)
		}
		if c.o.live {
			return fmt.Errorf("verify: the target differs from the source, written to during the copy (-live): stop its writers and run copy -live again")
		}
		return fmt.Errorf("verify: the target differs from the source")
	}
	fmt.Fprintf(c.out, "verified: %d tasks identical in order, revision, owner, content, log and push configs\n", n)
	return nil
}

// sameTask says how two stored tasks differ ("" when they do not).
func sameTask(a, b *engine.StoredTask) string {
	switch {
	case a.Revision != b.Revision:
		return fmt.Sprintf("revision %d in the source, %d in the target", a.Revision, b.Revision)
	case a.Owner != b.Owner:
		return fmt.Sprintf("owner %q in the source, %q in the target", a.Owner, b.Owner)
	case canonTask(a.Task) != canonTask(b.Task):
		return fmt.Sprintf("content differs:\n  source %s\n  target %s", canonTask(a.Task), canonTask(b.Task))
	case len(a.Log) != len(b.Log):
		return fmt.Sprintf("%d log entries in the source, %d in the target", len(a.Log), len(b.Log))
	}
	for i := range a.Log {
		x, y := &a.Log[i], &b.Log[i]
		if x.Revision != y.Revision || x.Time != y.Time || x.Kind != y.Kind || x.State != y.State || !bytes.Equal(x.Body, y.Body) {
			return fmt.Sprintf("log entry %d differs (revision %d, time %d, kind %d, state %s in the source; %d, %d, %d, %s in the target)",
				i, x.Revision, x.Time, x.Kind, x.State, y.Revision, y.Time, y.Kind, y.State)
		}
		if x.Trace != y.Trace { // the log's trace context is copied too (X1, H2)
			return fmt.Sprintf("log entry %d: trace %q in the source, %q in the target", i, x.Trace, y.Trace)
		}
	}
	return ""
}

// canonTask is a task's content in a comparable form: its A2A JSON (map
// keys sorted), the IDs quoted as raw bytes.
func canonTask(t *a2a.Task) string {
	c := *t
	c.ID, c.ContextID = "", ""
	if t.Status.Timestamp != nil {
		ts := t.Status.Timestamp.UTC()
		c.Status.Timestamp = &ts
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return "<unencodable task: " + err.Error() + ">"
	}
	return fmt.Sprintf("id=%q ctx=%q %s", string(t.ID), t.ContextID, b)
}

// sameConfigs says how the push configurations of task differ between
// the two outboxes ("" when they do not).
func (c *copier) sameConfigs(ctx context.Context, task a2a.TaskID) (string, error) {
	list := func(s *side) ([]*pushdelivery.Record, error) {
		if s.outbox == nil {
			return nil, nil
		}
		recs, err := liveConfigs(ctx, s, task)
		if err != nil {
			return nil, fmt.Errorf("verify: %w", err)
		}
		return recs, nil
	}
	a, err := list(c.src)
	if err != nil {
		return "", err
	}
	b, err := list(c.dst)
	if err != nil {
		return "", err
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d in the source, %d in the target", len(a), len(b)), nil
	}
	for i := range a {
		if x, y := canonRecord(a[i]), canonRecord(b[i]); x != y {
			return fmt.Sprintf("source %s, target %s", x, y), nil
		}
	}
	return "", nil
}

// liveConfigs returns the push records of task in s's outbox that serve
// the task there: without those of a deleted incarnation of its ID
// (pushdelivery.Live, SPEC N1).
func liveConfigs(ctx context.Context, s *side, task a2a.TaskID) ([]*pushdelivery.Record, error) {
	recs, err := s.outbox.List(ctx, task, "", pushdelivery.MaxConfigsPerTask)
	if err != nil {
		return nil, fmt.Errorf("read the %s's push configs: %w", s.what, err)
	}
	if recs, err = pushdelivery.Live(ctx, s.store, task, recs); err != nil {
		return nil, fmt.Errorf("read the %s's push configs: %w", s.what, err)
	}
	return recs, nil
}

// canonRecord is a push record in a comparable form: its configuration
// and delivery state, times in µs (what PostgreSQL keeps). Not its
// Incarnation: a mark of the store it is in (the configurations compared
// are those that serve their task in each: liveConfigs).
func canonRecord(r *pushdelivery.Record) string {
	cfg, _ := json.Marshal(r.Config)
	us := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMicro()
	}
	return fmt.Sprintf("{task=%q config=%s dest=%s created=%d delivered=%d attempts=%d failing=%d next=%d error=%q done=%v}",
		string(r.TaskID), cfg, r.Dest, us(r.Created), r.Delivered, r.Attempts, us(r.FailingSince), us(r.NextAt), r.LastError, r.Done)
}
