// Package authztest holds attacks on the authorization dispatcher
// (engine/authz) that every backend runs against itself: RunWriteWindow
// checks SPEC A9, that a write through the dispatcher acts only on the
// version of the task it checked, over a real store, with another writer
// changing the task between the check and the write.
package authztest
