package pushdelivery

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// recordVersion is the first byte of a stored record: the JSON of Record
// follows.
const recordVersion = 1

// errCorrupt marks a stored record that does not decode.
var errCorrupt = errors.New("pushdelivery: corrupt record")

// recordKey is the Pebble key of a record: the task ID's length (uvarint),
// the task ID, the configuration ID. Task IDs may hold any byte, so a
// length prefix, not a separator.
func recordKey(task a2a.TaskID, id string) []byte {
	k := binary.AppendUvarint(nil, uint64(len(task)))
	k = append(k, task...)
	return append(k, id...)
}

// encodeRecord is the stored form of r (without lease state: a lease does
// not outlive its process).
func encodeRecord(r *Record) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("pushdelivery: encode record: %w", err)
	}
	return append([]byte{recordVersion}, b...), nil
}

// decodeRecord reverses encodeRecord for the record stored under key k.
// The IDs come from the key: JSON cannot carry every byte a task ID may
// hold.
func decodeRecord(k, v []byte) (*Record, error) {
	n, w := binary.Uvarint(k)
	if w <= 0 || uint64(len(k)-w) < n || len(v) == 0 || v[0] != recordVersion {
		return nil, errCorrupt
	}
	var r Record
	if err := json.Unmarshal(v[1:], &r); err != nil {
		return nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	r.TaskID = a2a.TaskID(k[w : w+int(n)])
	r.Config.TaskID = r.TaskID
	r.Config.ID = string(k[w+int(n):])
	return &r, nil
}
