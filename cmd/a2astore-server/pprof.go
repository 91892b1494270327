package main

import (
	"net/http"
	"net/http/pprof"
)

// pprofPath is where the metrics listener serves Go's profiles
// (net/http/pprof): CPU (profile?seconds=N), heap, goroutines, execution
// trace, … They show what every caller's requests cost, so, like
// /metrics, only the operators' listener serves them; the A2A listeners
// never do.
const pprofPath = "/debug/pprof/"

// handlePprof adds net/http/pprof's handlers to mux under pprofPath.
func handlePprof(mux *http.ServeMux) {
	mux.HandleFunc(pprofPath, pprof.Index) // and every named profile under it
	mux.HandleFunc(pprofPath+"cmdline", pprof.Cmdline)
	mux.HandleFunc(pprofPath+"profile", pprof.Profile)
	mux.HandleFunc(pprofPath+"symbol", pprof.Symbol)
	mux.HandleFunc(pprofPath+"trace", pprof.Trace)
}
