// Package engine is the a2astore contract: the types every backend shares,
// the Store interface, its sentinel errors, the v1 page-token codec, the
// clock rule and the request validation all backends apply the same way.
//
// Limits bound the size and nesting of the tasks a store accepts, so that
// every stored task can be served to any A2A client; every backend applies
// them, identically, before writing.
//
// It imports no backend. Backends (engine/memstore, pebblestore, pgstore)
// import it and assert var _ engine.Store = (*Store)(nil); decorators such as
// engine/authz wrap any Store.
//
// Clause ids (S1, T3, L7, …) refer to SPEC.md in the repository's shared
// documentation; tests cite them by name.
package engine
