// Package tasklog reads and maintains the task log of any engine.LogStore
// (SPEC K7): Tail follows one task's log from a revision on, waiting for
// new entries (woken by the store's WatchLog, with a slow poll as the
// safety net), and Trimmer is the background service that trims the logs
// of idle tasks (LogStore.TrimLog) so that a store's log stays bounded by
// the last retention window's writes.
package tasklog
