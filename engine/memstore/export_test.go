package memstore

// IDInline and LargeRecord are the ID length kept beside the index entry
// and the record size kept apart, for storetest.StressOptions.
const (
	IDInline    = idInline
	LargeRecord = largeRecord
)

// NewColliding returns a store whose ID map hashes every ID to one of n
// values, so that most IDs take idMap's collision path.
func NewColliding(opts Options, n uint64) *Store {
	s := New(opts)
	s.mu.ids.testHash = func(id string) uint64 {
		var h uint64
		for i := range len(id) {
			h = h*31 + uint64(id[i])
		}
		return h % n
	}
	return s
}

// NewIDsInRecords returns a store that keeps every ID in its record, as
// it keeps IDs longer than idInline: the conformance suite's IDs are
// shorter.
func NewIDsInRecords(opts Options) *Store {
	s := New(opts)
	s.mu.slots.data.idsInRecords = true
	return s
}
