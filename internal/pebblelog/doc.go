// Package pebblelog holds the quiet pebble.Logger the repository's
// commands, tests and benchmarks give pebblestore: Pebble logs a line per
// flush and compaction, which would flood a progress line or a test log.
package pebblelog
