package memstore_test

import (
	"testing"

	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storetest"
)

// stressOptions sizes storetest's stress tests to the slab: IDs around the
// inline length, bodies around the size kept apart.
var stressOptions = storetest.StressOptions{InlineID: memstore.IDInline, LargeBody: memstore.LargeRecord}

// TestInterleavedModel runs storetest's interleaved model test (S4, L5,
// L7, L8, K7, R1) on a slab that keeps compacting: plain, with colliding
// ID hashes (16 values: most IDs take the ID map's collision path) and
// with every ID in its record.
func TestInterleavedModel(t *testing.T) {
	t.Run("plain", func(t *testing.T) { storetest.RunInterleavedModel(t, harness(memstore.New), stressOptions) })
	t.Run("colliding", func(t *testing.T) {
		storetest.RunInterleavedModel(t, harness(func(o memstore.Options) *memstore.Store { return memstore.NewColliding(o, 16) }), stressOptions)
	})
	t.Run("idsInRecords", func(t *testing.T) { storetest.RunInterleavedModel(t, harness(memstore.NewIDsInRecords), stressOptions) })
}

// TestSameIDHammer runs storetest's same-ID write hammer (S7, S9, R1):
// no revision returned twice within an incarnation, invariants between
// and after the writes, with the log off and on.
func TestSameIDHammer(t *testing.T) {
	storetest.RunSameIDHammer(t, harness(memstore.New), stressOptions)
}

// TestTrimLogClockBack runs storetest's clock-back trim test (K7, S4): a
// task written behind where TrimLog goes on still has its log trimmed.
func TestTrimLogClockBack(t *testing.T) { storetest.RunTrimLogClockBack(t, harness(memstore.New)) }
