// Package loghub wakes the readers of task logs (engine.LogStore.WatchLog):
// a store calls Wake after it commits an entry, a reader watches the task
// it reads. A wake is a hint to read the log again, coalesced and never
// blocking the writer; whoever misses one finds the entry on its next read.
package loghub
