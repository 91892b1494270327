package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// Where a served request's CPU goes (#31): a CPU profile of a2astore-server
// taken during a loadgen row (server/<backend>-jsonrpc-<workload>.pprof,
// results/run.sh) is split by owner. Each sample is classified by walking
// its stack from the leaf up (inlined frames included, innermost first):
//
//   - a frame of a GC background worker (mark workers, the sweeper, the
//     scavenger) makes the sample runtime/GC;
//   - otherwise the first frame in a known owner's package decides
//     (ownerPackages);
//   - every other frame — the runtime's allocation and assists, reflect,
//     sync, syscalls, the net package, third-party libraries with no owner
//     of their own (tidwall/btree, pgx, prometheus) — is charged to the
//     first owner above it;
//   - a stack with no owner frame at all (the scheduler, idle netpoll) is
//     "other runtime".
//
// The next different owner above the deciding frame is the sample's
// caller: encoding called from a2a-go (its deep copies through
// encoding/gob) is told apart from encoding called from the serving layer.

// owner is who a sample's CPU is charged to.
type owner int

const (
	ownerStore owner = iota
	ownerServing
	ownerA2AGo
	ownerTransport
	ownerEncoding
	ownerGC
	ownerOther
	numOwners
	ownerNone owner = -1 // no caller above
)

var ownerNames = [numOwners]string{
	ownerStore:     "a2astore store",
	ownerServing:   "a2astore serving layer",
	ownerA2AGo:     "a2a-go",
	ownerTransport: "net/http or gRPC",
	ownerEncoding:  "encoding",
	ownerGC:        "runtime/GC",
	ownerOther:     "other runtime (scheduler, syscalls)",
}

func (o owner) String() string { return ownerNames[o] }

const module = "github.com/a2astore/a2astore"

// ownerPackages are the package paths (and every package under them) of
// each owner, first match wins. cmd/a2astore-server is package main in the
// server's profile.
var ownerPackages = []struct {
	prefix string
	owner  owner
}{
	{module + "/engine", ownerStore},
	{module + "/pgstore", ownerStore},
	{module + "/pebblestore", ownerStore},
	{module + "/internal/pebblelog", ownerStore},
	{module, ownerServing}, // a2aserver, pgcluster, internal/backends
	{"main", ownerServing}, // cmd/a2astore-server
	{"github.com/a2aproject/a2a-go", ownerA2AGo},
	{"net/http", ownerTransport},
	{"google.golang.org/grpc", ownerTransport},
	{"golang.org/x/net/http2", ownerTransport},
	{"google.golang.org/protobuf", ownerTransport},
	{"encoding", ownerEncoding}, // encoding/json, encoding/gob, encoding/base64, …
}

// gcWorkers are the runtime's background GC functions (and their
// closures).
var gcWorkers = []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge"}

// funcPackage is the package path of a symbol name as Go writes it in
// profiles: "net/http.(*conn).serve" → "net/http",
// "slices.SortFunc[go.shape.*uint8]" → "slices".
func funcPackage(name string) string {
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i] // type arguments may hold paths and dots
	}
	slash := strings.LastIndexByte(name, '/')
	if i := strings.IndexByte(name[slash+1:], '.'); i >= 0 {
		return name[:slash+1+i]
	}
	return name
}

// ownerOf is the owner of a function by its package, ok false when no
// owner claims it (its CPU goes to the first owner above it).
func ownerOf(fn string) (owner, bool) {
	for _, g := range gcWorkers {
		if fn == g || strings.HasPrefix(fn, g+".") {
			return ownerGC, true
		}
	}
	pkg := funcPackage(fn)
	for _, p := range ownerPackages {
		if pkg == p.prefix || strings.HasPrefix(pkg, p.prefix+"/") {
			return p.owner, true
		}
	}
	return 0, false
}

// classify is the owner of one stack (leaf first, as a profile sample
// holds it) and the next different owner above it (ownerNone if none).
func classify(stack []*profile.Location) (who, caller owner) {
	who, caller = ownerOther, ownerNone
	found := false
	for _, loc := range stack {
		for _, ln := range loc.Line {
			if ln.Function == nil {
				continue
			}
			o, ok := ownerOf(ln.Function.Name)
			switch {
			case !ok:
			case !found:
				who, found = o, true
				if o == ownerGC {
					return who, caller
				}
			case o != who:
				return who, o
			}
		}
	}
	return who, caller
}

// cpuSplit is a profile's CPU by owner.
type cpuSplit struct {
	Duration time.Duration        // the profile's wall time
	Total    int64                // CPU sampled, ns
	Owner    [numOwners]int64     // CPU by owner, ns
	Caller   [numOwners]callerCPU // CPU of each owner by its caller
	Store    int64                // CPU with any store frame on the stack (inclusive), ns
}

// callerCPU is one owner's CPU by the owner above it, ns; the last slot
// is "none above".
type callerCPU [numOwners + 1]int64

func (c *callerCPU) add(o owner, v int64) {
	if o == ownerNone {
		o = numOwners
	}
	c[o] += v
}

// Share is owner o's share of the sampled CPU.
func (c *cpuSplit) Share(o owner) float64 {
	if c.Total == 0 {
		return 0
	}
	return float64(c.Owner[o]) / float64(c.Total)
}

// storePackages are the packages whose frames anywhere on a stack count
// the sample as "under the store" (inclusive): a2astore's store, or
// a2a-go's task store package (InMemory) when the server serves from it.
var storePackages = []string{module + "/engine", module + "/pgstore", module + "/pebblestore", "github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"}

// underStore reports whether a store frame is anywhere on the stack.
func underStore(stack []*profile.Location) bool {
	for _, loc := range stack {
		for _, ln := range loc.Line {
			if ln.Function == nil {
				continue
			}
			pkg := funcPackage(ln.Function.Name)
			for _, p := range storePackages {
				if pkg == p || strings.HasPrefix(pkg, p+"/") {
					return true
				}
			}
		}
	}
	return false
}

// splitProfile classifies every sample of a CPU profile.
func splitProfile(p *profile.Profile) (*cpuSplit, error) {
	vi := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			vi = i
		}
	}
	if vi < 0 {
		return nil, errors.New("not a CPU profile (no cpu/nanoseconds sample type)")
	}
	c := &cpuSplit{Duration: time.Duration(p.DurationNanos)}
	for _, s := range p.Sample {
		v := s.Value[vi]
		who, caller := classify(s.Location)
		c.Total += v
		c.Owner[who] += v
		c.Caller[who].add(caller, v)
		if underStore(s.Location) {
			c.Store += v
		}
	}
	return c, nil
}

// readProfile reads and splits a CPU profile; a missing file is nil, no
// error (runs recorded before profiles were taken).
func readProfile(path string) (*cpuSplit, error) {
	f, err := openOptional(path)
	if f == nil || err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c, err := splitProfile(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
