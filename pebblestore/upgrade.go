package pebblestore

import (
	"bytes"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/taskcodec"
)

// The upgrades from format 1 (no owners) and format 2 (no status indexes)
// to format 3.
//
// Format 3 adds the status indexes (keys.go: s ‖ state ‖ cursor and, for a
// task with an owner, u ‖ asc(owner) ‖ state ‖ cursor, C7). Every upgrade
// first deletes every s and u key (a format-2 release may have opened the
// database after an interrupted upgrade and moved or deleted tasks whose
// status keys it did not know), then writes, batch by batch as below, the
// status keys of each format-2 record, and with each format-1 record's
// rewrite all its keys. The format key is written last, so an interrupted
// upgrade starts over at the next Open.
//
// Format 1 light values (in records and index values) were
//
//	state code ‖ uvarint len ‖ contextID ‖ uvarint len ‖ status timestamp ‖ metadata
//
// with no owner, no leading version byte, no o or p index keys, no owner
// counters and no format key. Owners, if any, were recorded by
// engine/authz's OwnerPolicy in task metadata, as a JSON string under
// "a2astore.owner" or the key its former MetadataKey option named
// (Options.UpgradeOwnerKey; Options.UpgradeWithoutOwners: none).
//
// The upgrade rewrites the records in batches of upgradeChunk: each batch
// turns its format-1 records, their global and context index values, into
// format 2 (with the owner read from metadata), adds their owner index keys
// and owner counters, and commits atomically and synced (the progress of
// an interrupted upgrade is kept). A record is thus format 1 with
// format-1 index values and no owner keys, or format 2 with all of them —
// never half of each — whatever the crash point. The format key is written
// last, once no format-1 record remains. Open serves the
// database only after that, so a crash mid-upgrade leaves a database that
// the next Open upgrades further (format-2 records are skipped) before
// anything is listed. The upgrade runs with the rollback guard in place
// (guard.go): no release before format 2 can open the database once it
// has begun. (Had one, it would read a format-2 value as corrupt — its
// leading byte is no state code — rather than misread it, and write its
// tasks in format 1, which the repair scan upgrades.) Bodies and the
// format-1 counters are left as they are; task metadata too (the owner
// key stays in it).

// defaultUpgradeOwnerKey is the metadata key where engine/authz's
// OwnerPolicy kept owners by default before stores recorded them.
const defaultUpgradeOwnerKey = "a2astore.owner"

// upgradeChunk is how many format-1 records one upgrade batch rewrites.
var upgradeChunk = 512

// upgradeChunkDone, when set (by tests), runs after each upgrade batch
// commits.
var upgradeChunkDone func()

// upgradeStats counts what an upgrade did, for its log line.
type upgradeStats struct {
	upgraded, owned, overLong, skipped int
	indexed                            int // format-2 records given their status keys
}

// upgradeFromV1 upgrades a format-1 (or partly upgraded) database to format
// 2, reading owners from metadata key ownerKey ("": none).
func (s *Store) upgradeFromV1(dir, ownerKey string) error {
	s.logger.Infof("pebblestore: %s: upgrading the database from format 1 to %d (%s)", dir, formatVersion, ownersFrom(ownerKey))
	st, err := s.upgradeRecords(dir, ownerKey, true)
	if err != nil {
		return err
	}
	s.logger.Infof("pebblestore: %s: upgraded to format %d: %d tasks rewritten (%d with an owner; %d owners over %d bytes left unowned), %d already upgraded",
		dir, formatVersion, st.upgraded, st.owned, st.overLong, engine.MaxOwnerBytes, st.indexed)
	return nil
}

// repairV1 is the upgrade's scan of a format-2 database last opened
// without the rollback guard: a release before format 2 may have opened
// it and created tasks in format 1, which this build could not read. They
// are upgraded as the upgrade would (their owners from metadata key
// ownerKey); format-2 records are left as they are.
func (s *Store) repairV1(dir, ownerKey string) error {
	s.logger.Infof("pebblestore: %s: the database was last opened by a release without the rollback guard: "+
		"checking it for tasks written in format 1 by a release before format %d", dir, formatVersion)
	st, err := s.upgradeRecords(dir, ownerKey, false)
	if err != nil {
		return err
	}
	if st.upgraded > 0 {
		s.logger.Infof("pebblestore: %s: %d tasks written in format 1 after the upgrade to format %d (a release before format %d opened the database) "+
			"were upgraded (%s; %d with an owner; %d owners over %d bytes left unowned)",
			dir, st.upgraded, formatVersion, formatVersion, ownersFrom(ownerKey), st.owned, st.overLong, engine.MaxOwnerBytes)
	}
	return nil
}

// ownersFrom says where the upgrade takes owners from.
func ownersFrom(ownerKey string) string {
	if ownerKey == "" {
		return "no task owners: Options.UpgradeWithoutOwners"
	}
	return fmt.Sprintf("task owners from metadata key %q", ownerKey)
}

// upgradeFromV2 upgrades a format-2 database to format 3: it adds the
// status indexes, and rewrites format-1 records a release before format 2
// may have written (as repairV1), their owners from metadata key ownerKey.
func (s *Store) upgradeFromV2(dir, ownerKey string) error {
	s.logger.Infof("pebblestore: %s: upgrading the database from format 2 to %d: adding the status indexes", dir, formatVersion)
	st, err := s.upgradeRecords(dir, ownerKey, true)
	if err != nil {
		return err
	}
	s.logger.Infof("pebblestore: %s: upgraded to format %d: status index keys written for %d tasks; %d tasks in format 1 rewritten (%s)",
		dir, formatVersion, st.indexed, st.upgraded, ownersFrom(ownerKey))
	return nil
}

// upgradeRecords rewrites every format-1 record into the current format
// and, with addStatus, first deletes every status index key and then
// writes those of every format-2 record; then it records the format.
func (s *Store) upgradeRecords(dir, ownerKey string, addStatus bool) (upgradeStats, error) {
	var st upgradeStats
	if addStatus {
		b := s.db.NewBatch()
		_ = b.DeleteRange([]byte{tagState}, []byte{tagState + 1}, nil)
		_ = b.DeleteRange([]byte{tagOwnerSt}, []byte{tagOwnerSt + 1}, nil)
		err := b.Commit(pebble.Sync)
		b.Close()
		if err != nil {
			return st, fmt.Errorf("pebblestore: open %s: upgrade to format %d: %v: %w", dir, formatVersion, err, engine.ErrInternal)
		}
	}
	for from := []byte{tagRecord}; from != nil; {
		var err error
		if from, err = s.upgradeChunk(from, ownerKey, addStatus, &st); err != nil {
			return st, fmt.Errorf("pebblestore: open %s: upgrade to format %d: %w", dir, formatVersion, err)
		}
	}
	return st, s.writeFormat(dir)
}

// upgradeChunk rewrites the next upgradeChunk format-1 records at or after
// key from — and with addStatus writes the status keys of as many format-2
// records — in one batch, and returns the key to go on from (nil: no
// record is left).
func (s *Store) upgradeChunk(from []byte, ownerKey string, addStatus bool, st *upgradeStats) (next []byte, err error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: []byte{tagRecord + 1}})
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, engine.ErrInternal)
	}
	defer it.Close()
	b := s.db.NewBatch()
	defer b.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n == upgradeChunk {
			next = bytes.Clone(it.Key())
			break
		}
		id := a2a.TaskID(it.Key()[1:])
		if r, err := decodeRecord(it.Value()); err == nil {
			if !addStatus {
				st.skipped++ // current: upgraded before a crash, or never format 1
				continue
			}
			cur, lv := engine.Cursor{UpdatedAt: r.updatedAt, ID: id}, r.light.append(nil)
			_ = b.Set(stateKey(r.light.state, cur), lv, nil)
			if r.light.owner != "" {
				_ = b.Set(ownerStateKey(r.light.owner, r.light.state, cur), lv, nil)
			}
			st.indexed++
		} else if err := upgradeRecord(b, id, it.Value(), ownerKey, st); err != nil {
			return nil, err
		}
		n++
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("%v: %w", err, engine.ErrInternal)
	}
	if n > 0 {
		// Synced, so that the progress of an interrupted upgrade is kept.
		if err := b.Commit(pebble.Sync); err != nil {
			return nil, fmt.Errorf("commit: %v: %w", err, engine.ErrInternal)
		}
		if upgradeChunkDone != nil {
			upgradeChunkDone()
		}
	}
	return next, nil
}

// upgradeRecord adds to b the rewrite of task id's format-1 record value v.
func upgradeRecord(b *pebble.Batch, id a2a.TaskID, v []byte, ownerKey string, st *upgradeStats) error {
	r, err := decodeRecordWith(bytes.Clone(v), decodeLightV1)
	if err != nil {
		return fmt.Errorf("record %q is neither format 1 nor %d: %w", id, formatVersion, err)
	}
	md, err := taskcodec.DecodeMetadata(r.light.metadata)
	if err != nil {
		return fmt.Errorf("record %q: metadata: %v: %w", id, err, engine.ErrInternal)
	}
	// OwnerPolicy recorded a string; anything else gave no access to anyone.
	var owner string
	if ownerKey != "" {
		owner, _ = md[ownerKey].(string)
	}
	if engine.ValidateOwner(owner) != nil {
		// No list can name an owner this long (O1): left unowned, the task
		// stays where every unscoped list sees it.
		owner = ""
		st.overLong++
	}
	r.light.owner = owner
	cur := engine.Cursor{UpdatedAt: r.updatedAt, ID: id}
	lv := r.light.append(nil)
	_ = b.Set(recordKey(id), r.append(nil), nil)
	for _, k := range indexKeys(owner, r.light.contextID, r.light.state, cur) {
		_ = b.Set(k, lv, nil)
	}
	if owner != "" {
		exist, shape := ownerCounterKeys(owner, r.light.contextID, r.light.state)
		for _, k := range append(shape, exist) {
			_ = b.Merge(k, counterDelta(+1), nil)
		}
		st.owned++
	}
	st.upgraded++
	return nil
}

// decodeLightV1 decodes a format-1 light value. The slices alias b.
func decodeLightV1(b []byte) (light, error) { return decodeLightFields(b, false) }
