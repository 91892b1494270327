package pushdelivery

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// ErrNoDatabase is Checkpoint's error on an outbox held in memory only.
var ErrNoDatabase = errors.New("pushdelivery: the outbox has no database")

// Checkpoint writes a consistent copy of the Pebble outbox, as of one
// instant, into dir, which must not exist (SPEC X1: a backup of a Pebble
// store and its outbox taken while the server runs). Every Save, Delete
// and Commit that returned before the call is in it. Take it before the
// store's own checkpoint: a record's Delivered then never exceeds its
// task's revision in the backup, and a restored server repeats some
// deliveries rather than skipping any.
func (l *Local) Checkpoint(dir string) error {
	if l.db == nil {
		return ErrNoDatabase
	}
	if err := l.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("pushdelivery: checkpoint %s: %w", dir, err)
	}
	return nil
}
