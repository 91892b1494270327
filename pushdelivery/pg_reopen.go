package pushdelivery

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/jackc/pgx/v5"
)

// maxDirty bounds the tasks Touch keeps: past it a rescan starts next
// (once the one under way, if any, ends).
const maxDirty = 10_000

// reopenTimeout bounds each reopen statement, so that a slow one delays
// a claim by that much at most.
const reopenTimeout = 5 * time.Second

// Touch implements Toucher: the next Claim reopens task's Done records if
// the task has moved past them. An ID no task can have (PostgreSQL text
// holds no NUL and only valid UTF-8; S8's length) is ignored.
func (p *PG) Touch(task a2a.TaskID) {
	id := string(task)
	if id == "" || len(id) > engine.MaxIDBytes || !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.touchLocked(task)
}

// touchLocked marks task, or, when maxDirty tasks are marked already,
// asks for a rescan.
// REQUIRES: p.mu held.
func (p *PG) touchLocked(task a2a.TaskID) {
	if _, ok := p.mu.dirty[task]; ok || len(p.mu.dirty) < maxDirty {
		p.mu.dirty[task] = struct{}{}
	} else {
		p.mu.full = true
	}
}

// reopen clears idle and Done on the records whose task has moved past
// Delivered: those of the touched tasks, and, in a rescan, those of every
// task (the first) or of the tasks written since the last. A rescan
// starts every Rescan (and after Touch dropped a task) once the last one
// has ended; each reopen reads the next batch of it (p.batch records, or
// tasks), so that no Claim waits for all of them. A touched task with
// a leased record, or with a record another transaction had locked,
// stays touched: its holder's commit may be storing Done without seeing
// the write that touched it. A failure is logged, not returned, so that
// claims go on; touched tasks stay touched, and a rescan's batch is read
// again. Each statement gets reopenTimeout, and runs under readCommitted
// (its FOR UPDATE SKIP LOCKED, on a row committed since the statement's
// snapshot, would fail under a stricter session default).
func (p *PG) reopen(ctx context.Context, now time.Time) {
	p.mu.Lock()
	if !p.mu.scanning && (p.mu.full || p.mu.lastScan.IsZero() || now.Sub(p.mu.lastScan) >= p.opts.Rescan) {
		// A recent rescan starts at the previous one's start less Rescan:
		// a write stamped before then but committed since is still read.
		p.mu.recent, p.mu.afterAt = p.mu.fullDone, p.mu.lastScan.Add(-p.opts.Rescan)
		p.mu.scanning, p.mu.full, p.mu.lastScan, p.mu.after = true, false, now, [2]string{}
		p.mu.gen++
	}
	scanning, pos := p.mu.scanning, scanPos{p.mu.gen, p.mu.after, p.mu.afterAt, p.mu.recent}
	ids := make([]string, 0, len(p.mu.dirty))
	for id := range p.mu.dirty {
		ids = append(ids, string(id))
	}
	clear(p.mu.dirty)
	p.mu.Unlock()
	if scanning {
		p.rescanBatch(ctx, pos)
	}
	if len(ids) == 0 {
		return
	}
	kept, err := p.reopenTasks(ctx, ids)
	if err != nil {
		p.opts.Logger.Warn("pushdelivery: reopen the finished records of touched tasks", "tasks", len(ids), "err", err)
		kept = ids
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range kept {
		p.touchLocked(a2a.TaskID(id))
	}
}

// scanPos is where a rescan's next batch starts: after key after, in
// rescan gen.
type scanPos struct {
	gen     uint64
	after   [2]string
	afterAt time.Time // recent: after the tasks written at afterAt and ID after[0]
	recent  bool
}

// rescanBatch reopens the batch of the rescan at pos, and moves the
// rescan on (or ends it after its last batch), unless another reopen did.
func (p *PG) rescanBatch(ctx context.Context, pos scanPos) {
	ctx, cancel := context.WithTimeout(ctx, reopenTimeout)
	defer cancel()
	var n int
	var last [2]string
	var lastAt *time.Time
	err := p.readCommitted(ctx, func(tx pgx.Tx) error {
		if pos.recent {
			return tx.QueryRow(ctx, p.sql.rescanRecent, pos.afterAt, pos.after[0], p.batch).Scan(&n, &lastAt, &last[0])
		}
		return tx.QueryRow(ctx, p.sql.rescan, pos.after[0], pos.after[1], p.batch).Scan(&n, &last[0], &last[1])
	})
	if err != nil {
		p.opts.Logger.Warn("pushdelivery: reopen idle records (rescan)", "recent", pos.recent, "err", err)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mu.scanning || p.mu.gen != pos.gen || p.mu.after != pos.after || !p.mu.afterAt.Equal(pos.afterAt) {
		return // another reopen read this batch too and moved on
	}
	if n < p.batch {
		p.mu.scanning = false
		p.mu.fullDone = true
	}
	p.mu.after = last
	if lastAt != nil {
		p.mu.afterAt = *lastAt
	}
}

// reopenTasks reopens the records of tasks ids and returns those of ids
// to keep touched.
func (p *PG) reopenTasks(ctx context.Context, ids []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, reopenTimeout)
	defer cancel()
	var kept []string
	err := p.readCommitted(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, p.sql.reopenTasks, ids)
		if err != nil {
			return err
		}
		kept, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return kept, err
}
