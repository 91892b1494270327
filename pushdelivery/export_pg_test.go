package pushdelivery

import "github.com/a2aproject/a2a-go/v2/a2a"

// TouchUnchecked marks task as Touch does, without Touch's check of the
// ID: a way to make the reopen of the touched tasks fail.
func (p *PG) TouchUnchecked(task a2a.TaskID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.dirty[task] = struct{}{}
}

// SetRescanBatch sets the Done records a batch of a rescan reads.
func (p *PG) SetRescanBatch(n int) { p.batch = n }

// Statements returns the outbox's claim, depth and recent-rescan SQL (for
// the tests that count the rows they read).
func (p *PG) Statements() (claim, depth, rescanRecent string) {
	return p.sql.claim, p.sql.depth, p.sql.rescanRecent
}

// Rescanning reports whether a rescan is under way (its batches read at
// the next claims).
func (p *PG) Rescanning() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.scanning
}

// SweepStatements returns the sweep's statements: over deletion marks,
// of never-created tasks, and without marks.
func (p *PG) SweepStatements() (deleted, unborn, all string) {
	return p.sql.sweepDeleted, p.sql.sweepUnborn, p.sql.sweep
}

// SweepWalkStatement returns the statement of one step of the sweep's
// walk over the records by key.
func (p *PG) SweepWalkStatement() string { return p.sql.sweepWalk }
