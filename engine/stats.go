package engine

// ListStats is what one List call cost, for benchmarks and metrics. A
// backend fills it in ListResponse.Stats; a backend that does not leaves it
// zero. It never reaches the wire.
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

// Add adds what o cost to s: a decorator that serves one List with several
// store calls (the authz dispatcher's scan batches) reports their sum.
func (s *ListStats) Add(o ListStats) {
	s.Examined += o.Examined
	s.Counted += o.Counted
	s.TotalComputed = s.TotalComputed || o.TotalComputed
}
