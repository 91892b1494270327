package pushdelivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Record is a push-notification configuration of a task together with the
// delivery state of its webhook: the delivery record of the next event of
// the task's log (engine.LogStore) that this webhook has not received.
// Later events wait behind it, so per task and webhook events go out in
// log order, and one record per configuration is all the state delivery
// needs (the events themselves are read from the log, never copied).
type Record struct {
	TaskID a2a.TaskID
	// Config is the configuration: ID, URL, Token, Auth as the client set
	// them; its TaskID is always the record's (an outbox sets it).
	Config a2a.PushConfig
	// Dest is the webhook's destination, scheme://host:port of Config.URL,
	// the key of the per-destination concurrency limit.
	Dest    string
	Created time.Time
	// Delivered is the task revision of the last log entry delivered (2xx),
	// dropped after its deadline, or passed over (entries that deliver
	// nothing, such as history appends). Zero: nothing yet; a
	// configuration saved on an existing task starts at the task's
	// revision then (events before it are not sent).
	Delivered int64
	// Attempts counts the failed attempts of the entry after Delivered.
	// FailingSince is when the webhook began to fail: its first failed
	// attempt since its last success (zero when none). A dropped entry
	// does not reset it, so a webhook down past the deadline gets one
	// attempt per later entry, not a deadline each.
	Attempts     int
	FailingSince time.Time
	// NextAt: not before this time (backoff after a failure).
	NextAt    time.Time
	LastError string // the last failure, without URL or credentials
	// Done: the task was terminal at Delivered, its log's last entry
	// when committed; the record is kept for listing until its task goes.
	// A later write to the task (SPEC S7 allows writes to a terminal
	// task) makes the record due again, Done or not (N2: every logged
	// event is delivered); an outbox may clear Done then.
	Done bool
	// Incarnation is the mark of the last deletion of the task's ID that
	// the store remembered when the configuration was saved
	// (engine.LogStore.Deleted; 0: none): the incarnation of the task
	// the configuration was saved for. A store that since remembers a
	// later deletion says that task is gone, and the record belongs to
	// no later task created under the ID (SPEC N1): the worker drops it
	// unsent (Lease's Drop), ConfigStore shows it no more, and a Save
	// for a later incarnation removes it. 0 is unknown as well as none
	// (a record saved by an earlier release): such a record belongs to a
	// deleted task only if the deletion's mark is after its Created
	// (Record.stale).
	Incarnation int64 `json:",omitempty"`
}

// stale reports whether r belongs to an incarnation of its task deleted
// since it was saved, mark being the store's mark of the task's last
// deletion now (SPEC N1). A mark the store has forgotten (0, after the
// log retention) is not a deletion. Incarnation 0 is unknown for a
// record saved by a release before incarnations (or before any
// deletion): such a record is stale only if the deletion came after it
// was created (mark, a time on the store's clock, after Created).
func (r *Record) stale(mark int64) bool {
	if r.Incarnation == 0 {
		return mark > 0 && mark > r.Created.UnixMicro()
	}
	return mark > r.Incarnation
}

// afresh clears r's failure state, due at nextAt: a save that changes
// the configuration (another URL, token or credentials) does not inherit
// the failures of the one it replaces.
func (r *Record) afresh(nextAt time.Time) {
	r.Attempts, r.FailingSince, r.LastError, r.NextAt = 0, time.Time{}, "", nextAt
}

// sameConfig reports whether a and b are the same configuration.
func sameConfig(a, b a2a.PushConfig) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// withTask is c with task's ID.
func withTask(c a2a.PushConfig, task a2a.TaskID) a2a.PushConfig {
	c.TaskID = task
	return c
}

// Outbox persists push configurations and their delivery state: the
// durable part of push delivery. A backend that persists tasks persists
// its outbox (PostgreSQL: a table any instance claims from; Pebble: a
// local database beside the store's); the in-memory outbox is best
// effort and goes with the process, as the in-memory store does.
type Outbox interface {
	// Save stores r's configuration under (r.TaskID, r.Config.ID),
	// replacing the configuration of an existing record and keeping its
	// delivery state (its failure state only when the configuration is
	// unchanged: a new one starts with no attempts, due at r.NextAt), or
	// inserting r as given. It first removes the task's records of an
	// earlier incarnation (stale against r's Incarnation as a mark:
	// Record.stale, SPEC N1): a record of
	// the same ID among them is replaced by r as given. It fails with ErrTooMany
	// when the task would have more than MaxConfigsPerTask.
	Save(ctx context.Context, r *Record) error
	// Get returns the record (ErrNotFound when missing).
	Get(ctx context.Context, task a2a.TaskID, id string) (*Record, error)
	// List returns the task's records with configuration ID above after
	// (bytewise), ascending, at most limit of them.
	List(ctx context.Context, task a2a.TaskID, after string, limit int) ([]*Record, error)
	// Delete removes one record (missing: no error); DeleteAll all of a task.
	Delete(ctx context.Context, task a2a.TaskID, id string) error
	DeleteAll(ctx context.Context, task a2a.TaskID) error
	// Claim returns a due record with its lease, or nil when none is due:
	// its task's revision above Delivered, NextAt at or before now, no
	// live lease of another worker, its Dest not in busy, its task not in
	// skip (the worker's fairness across owners, SPEC N4). A Done record
	// whose task is written to again is due as well: from the next Claim
	// when the outbox was told by Touch, otherwise within its rescan
	// period. While the lease lasts no other worker, in this process or
	// another, claims the record; a lease whose holder died expires after
	// the outbox's lease time and the record is claimed again (a
	// duplicate delivery is possible then, a loss is not).
	Claim(ctx context.Context, now time.Time, busy []string, skip ...a2a.TaskID) (Lease, error)
	// Sweep deletes records whose task no longer exists and that are older
	// than grace (configurations of deleted or retained-away tasks go with
	// them), at most limit; it returns how many it deleted.
	Sweep(ctx context.Context, grace time.Duration, limit int) (int, error)
	// Depth reports the records behind their task (events still to
	// deliver, due or waiting for a retry; a caught-up or Done record
	// whose task was written to since counts once Claim would take it)
	// and the age of the oldest due one (zero when none), for the
	// metrics. A due record has waited since the later of its NextAt and
	// the time its first undelivered log entry was committed. Its cost
	// is the records behind, not the records stored (SPEC C6).
	Depth(ctx context.Context, now time.Time) (pending int, oldestDue time.Duration, err error)
}

// Lease is a claimed record: its holder delivers and then calls Commit
// with the new delivery state, or Release to give it back unchanged.
type Lease interface {
	Record() *Record
	// Revision is the task's revision at claim time (the log's head).
	Revision() int64
	// Until is when the lease ends, on the clock of the now given to
	// Claim (now plus the outbox's lease time): from then on another
	// worker may claim the record, so its holder starts no post that
	// might not finish before it.
	Until() time.Time
	// Commit records r's delivery state (Delivered, Attempts,
	// FailingSince, NextAt, LastError, Done) and ends the lease. A
	// record committed Done whose task has passed Delivered (a write
	// since the claim) stays due. When the
	// lease was lost (expired and claimed by another worker, or the record
	// deleted) it changes nothing and returns ErrLeaseLost.
	Commit(ctx context.Context, r *Record) error
	Release(ctx context.Context)
}

// dropper is implemented by the leases of this package's outboxes: Drop
// deletes the leased record if the lease still holds it (a record saved
// again since, for a later incarnation of its task, is not the one
// leased and stays), ending the lease. The worker drops a record whose
// task was deleted since its configuration was saved (SPEC N1); with a
// lease without Drop it releases the record and sends nothing.
type dropper interface {
	Drop(ctx context.Context) error
}

// Toucher is implemented by an Outbox that reads task revisions only for
// the tasks it was told about, and for all of them only every rescan
// period: the worker calls Touch when a task gets an event, so that the
// next Claim reads the task's revision (Local), or reopens the task's
// Done records if it moved past them (PG, whose Claim reads the
// revisions of the records that are not Done).
type Toucher interface {
	Touch(task a2a.TaskID)
}

// Drainer is implemented by an Outbox that can claim among the records
// of given destinations only: the worker drains the records of
// destinations set aside past the deadline, whose entries are dropped
// unsent, whatever their owners have in flight (SPEC N4: a hostile
// owner's slow webhooks hold its slots; without it the records of its
// dead ones were never claimed and the queue grew with every event).
type Drainer interface {
	// ClaimAmong is Claim among the records whose Dest is in dests, with
	// no destination busy and no task skipped.
	ClaimAmong(ctx context.Context, now time.Time, dests []string) (Lease, error)
}

// Outbox errors.
var (
	ErrNotFound  = errors.New("pushdelivery: push config not found")
	ErrTooMany   = errors.New("pushdelivery: too many push configs on the task")
	ErrLeaseLost = errors.New("pushdelivery: lease lost")
)

// MaxConfigsPerTask bounds the configurations of one task.
const MaxConfigsPerTask = 16
