package engine

import "context"

// ListStats receives what one List call cost, for benchmarks and metrics.
// A caller that wants them puts a *ListStats in the context with
// WithListStats; a backend that supports them adds to it.
type ListStats struct {
	// Examined counts the index entries (or rows) the page read, the
	// look-ahead entry included: PageSize+1 for a full unfiltered page (C2).
	Examined int
	// Counted counts the entries a total had to inspect; 0 when the total
	// came from a maintained counter or was not asked for.
	Counted int
	// TotalComputed is set when the call computed TotalSize.
	TotalComputed bool
}

type listStatsKey struct{}

// WithListStats returns a context carrying st for the backend to fill.
func WithListStats(ctx context.Context, st *ListStats) context.Context {
	return context.WithValue(ctx, listStatsKey{}, st)
}

// ListStatsFrom returns the ListStats in ctx, or nil.
func ListStatsFrom(ctx context.Context) *ListStats {
	st, _ := ctx.Value(listStatsKey{}).(*ListStats)
	return st
}
