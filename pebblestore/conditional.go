package pebblestore

import (
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// The conditional writes (engine.ConditionalStore) are the unconditional
// ones with the revision compared under the task's write lock, on the
// record the write then replaces: Cancel, AppendHistory and Delete are
// CancelIf, AppendHistoryIf and DeleteIf with expected revision 0.
var _ engine.ConditionalStore = (*Store)(nil)

// mutateIf is mutate on the version expectedRevision of task id (0: any
// version): a task at another revision is ErrRevisionConflict before f
// runs, so nothing changes. A negative expectedRevision is
// ErrInvalidArgument, before the store is read.
func (s *Store) mutateIf(op string, id a2a.TaskID, expectedRevision int64, withBody bool, f func(old *current) (engine.Record, error)) (engine.Record, error) {
	if err := engine.ValidateExpectedRevision(expectedRevision); err != nil {
		return engine.Record{}, err
	}
	return s.mutate(op, id, withBody, func(old *current) (engine.Record, error) {
		if expectedRevision != 0 && expectedRevision != old.rec.revision {
			return engine.Record{}, fmt.Errorf("pebblestore: %s %q: revision %d, expected %d: %w",
				op, id, old.rec.revision, expectedRevision, engine.ErrRevisionConflict)
		}
		return f(old)
	})
}
