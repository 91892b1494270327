package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// oldLogValue is a log value as the release before the entries' traces
// wrote it: time ‖ kind ‖ uvarint(len(state)) ‖ state ‖ body.
func oldLogValue(at int64, kind engine.LogKind, state a2a.TaskState, body string) []byte {
	v := binary.BigEndian.AppendUint64(nil, uint64(at))
	v = append(v, byte(kind))
	v = binary.AppendUvarint(v, uint64(len(state)))
	return append(append(v, state...), body...)
}

// TestLogValueTrace (H2): the log value encoding keeps an entry's trace
// backward-compatibly. A value of the earlier release decodes as it did,
// with no trace, and an entry without a trace encodes to exactly that
// value (a store written before or without traces reads the same); an
// entry with one round-trips it. A stored trace that is no traceparent
// (zero IDs, unknown flags) reads as none, with the rest of the entry
// intact; a value whose trace is cut short is refused as corrupt.
func TestLogValueTrace(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	key := logKey("t1", 3)
	old := oldLogValue(1_700_000_000_000_000, engine.LogEvent, a2a.TaskStateWorking, `{"statusUpdate":{}}`)
	want := engine.LogEntry{Revision: 3, Time: 1_700_000_000_000_000, Kind: engine.LogEvent, State: a2a.TaskStateWorking, Body: []byte(`{"statusUpdate":{}}`)}

	id, got, err := decodeLog(key, old)
	if err != nil || id != "t1" || !sameEntry(got, want) {
		t.Fatalf("old value decoded as %q %+v, %v; want %+v", id, got, err, want)
	}
	if enc := encodeLogValue(&want); !bytes.Equal(enc, old) {
		t.Fatalf("an entry without a trace encodes as %x, want the earlier release's %x", enc, old)
	}

	traced := want
	traced.Trace = tp
	enc := encodeLogValue(&traced)
	if len(enc) != len(old)+traceLen || enc[8]&logTraced == 0 {
		t.Fatalf("traced value %x: want %d bytes, the traced mark", enc, len(old)+traceLen)
	}
	if _, got, err = decodeLog(key, enc); err != nil || !sameEntry(got, traced) {
		t.Fatalf("traced value decoded as %+v, %v; want %+v", got, err, traced)
	}

	at := 8 + 1 + 1 + len(a2a.TaskStateWorking) // the trace's offset
	for name, mangle := range map[string]func(v []byte){
		"zero trace ID": func(v []byte) { clear(v[at : at+16]) },
		"zero span ID":  func(v []byte) { clear(v[at+16 : at+24]) },
		"unknown flags": func(v []byte) { v[at+24] = 0x03 },
	} {
		v := bytes.Clone(enc)
		mangle(v)
		if _, got, err := decodeLog(key, v); err != nil || !sameEntry(got, want) {
			t.Errorf("%s: decoded as %+v, %v; want %+v (no trace)", name, got, err, want)
		}
	}
	short := oldLogValue(1, engine.LogEvent, a2a.TaskStateWorking, "0123456789")
	short[8] |= logTraced
	if _, _, err := decodeLog(key, short); !errors.Is(err, engine.ErrInternal) {
		t.Errorf("a trace cut short: %v, want ErrInternal", err)
	}
}

func sameEntry(a, b engine.LogEntry) bool {
	return a.Revision == b.Revision && a.Time == b.Time && a.Kind == b.Kind && a.State == b.State &&
		bytes.Equal(a.Body, b.Body) && a.Trace == b.Trace
}
