// Package taskcodec is the stored form of A2A tasks that the backends
// share: a compact, version-tagged binary encoding of the a2a types. It is
// the backends' toolkit, not the contract: engine/memstore, pebblestore and
// pgstore import it; engine does not.
//
// # Format
//
// A stored task (EncodeTask) is the version byte 1, then, in order: ID,
// context ID, state, status timestamp, status message, history (a count,
// then each message), artifacts (a count, then each artifact) and metadata.
// Strings are a uvarint length and the raw bytes, so IDs of any bytes (NUL,
// invalid UTF-8: SPEC S8) survive; a timestamp is time's binary form (in UTC
// when its zone offset has seconds, which that form cannot hold).
// Free-form values (metadata maps, data parts) are JSON values in a binary
// value form, so decoding parses no JSON. Decoding yields an independent
// copy (L9) whose A2A JSON equals that of the encoded task; a test walks the
// a2a types by reflection so that a field a new SDK adds cannot be dropped
// silently.
//
// A backend that stores parts of a task apart (pgstore keeps the status
// message, each history message and the artifacts in columns of their own)
// stores each part as a stored task that holds only that part, every other
// field empty: EncodeMessage, EncodeStatusMessage and EncodeArtifacts write
// that form without building a task, and their decoders accept only it.
// Metadata for light reads (EncodeMetadata) is the version byte and the
// value form of the map alone.
//
// The format is on disk (Pebble) and in database rows (PostgreSQL): it must
// not change. TestStoredFormIsStable pins it byte for byte; a new format
// needs a new version byte and a decoder for both.
//
// # Speed
//
// BenchmarkTaskDecode and BenchmarkTaskEncode compare the codec with
// encoding/json on a generated task of about 1 KB of JSON (internal/taskgen:
// a status message, 3 history messages, one 256-byte artifact; it reports
// the bytes of each form); BenchmarkMetadataDecode does the same for the
// metadata of a light page.
package taskcodec
