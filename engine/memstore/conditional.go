package memstore

import (
	"fmt"

	"github.com/a2astore/a2astore/engine"
)

// The conditional writes (engine.ConditionalStore) are the unconditional
// ones with a revision compared under the same lock as the write: Cancel,
// AppendHistory and Delete are CancelIf, AppendHistoryIf and DeleteIf with
// expected revision 0.
var _ engine.ConditionalStore = (*Store)(nil)

// checkRevision is the condition of a conditional write: nil when expected
// is 0 (unconditional) or equals rev, the stored revision.
func checkRevision(rev, expected int64) error {
	if expected != 0 && expected != rev {
		return fmt.Errorf("memstore: revision %d, expected %d: %w", rev, expected, engine.ErrRevisionConflict)
	}
	return nil
}
