// Package listpage is what every backend does with a validated list query
// (engine.Query, from engine.ParseListRequest) to build one page: which
// tasks pass the query's filters (L2), how each returned task is trimmed
// (L4), and how the response and its next-page token are assembled (T6).
//
// It is the backends' toolkit, not the contract: engine/memstore,
// pebblestore, pgstore and the engine/authz dispatcher import it, so the
// filter, trim and token rules are written once. The reference model in
// engine/storetest deliberately does not: it states the same rules on its
// own, so a bug here cannot pass the conformance suite.
package listpage
