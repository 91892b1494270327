package pgstore

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"
)

// WriteArgs returns the column values the store writes for task, in the
// order of the create statement's parameters $2..$10 (context_id, state,
// status_ts, status_ns, status_msg, metadata, artifacts, history,
// msg_ids): the benchmarks write the very same values by plain SQL.
func (s *Store) WriteArgs(task *a2a.Task) ([]any, error) {
	f, err := encode(task, s.limits)
	if err != nil {
		return nil, err
	}
	return []any{f.contextID, f.state, f.statusTS, f.statusNS, f.statusMsg, f.metadata, f.artifacts, f.history, f.msgIDs}, nil
}

// SetFoldHook makes every fold run f in its transaction after the fold
// statement, before the commit (nil: none); an error rolls the fold back.
func (s *Store) SetFoldHook(f func(context.Context, pgx.Tx) error) {
	if f == nil {
		s.foldHook.Store(nil)
		return
	}
	s.foldHook.Store(&f)
}

// FoldBatch is the most deltas one fold transaction takes.
const FoldBatch = foldBatch

// FoldOnReadRows is the ledger length past which a total wakes the roll-up.
const FoldOnReadRows = foldOnReadRows

// SetFoldOnReadRows sets the ledger length past which a total wakes the
// roll-up (math.MaxInt64: never), for a before/after benchmark.
func (s *Store) SetFoldOnReadRows(n int64) {
	if s.rollup == nil {
		panic("pgstore: SetFoldOnReadRows on a store without a roll-up")
	}
	s.rollup.readWake.Store(n)
}
