package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// synthProfile builds a CPU profile whose samples are the given stacks
// (leaf first; "a+b" is one location with b inlined into a: b innermost)
// with the given CPU, in ns.
func synthProfile(t *testing.T, samples map[string]int64) *profile.Profile {
	t.Helper()
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        1e7,
		DurationNanos: 2e9,
	}
	funcs := map[string]*profile.Function{}
	fn := func(name string) *profile.Function {
		if f, ok := funcs[name]; ok {
			return f
		}
		f := &profile.Function{ID: uint64(len(funcs) + 1), Name: name, SystemName: name}
		funcs[name] = f
		p.Function = append(p.Function, f)
		return f
	}
	for stack, v := range samples {
		s := &profile.Sample{Value: []int64{v / 1e7, v}}
		for _, frame := range strings.Split(stack, " < ") {
			loc := &profile.Location{ID: uint64(len(p.Location) + 1)}
			names := strings.Split(frame, "+")
			for i := len(names) - 1; i >= 0; i-- { // innermost first
				loc.Line = append(loc.Line, profile.Line{Function: fn(names[i])})
			}
			p.Location = append(p.Location, loc)
			s.Location = append(s.Location, loc)
		}
		p.Sample = append(p.Sample, s)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	a2aGo    = "github.com/a2aproject/a2a-go/v2/"
	memstore = "github.com/a2astore/a2astore/engine/memstore."
	adapter  = "github.com/a2astore/a2astore/a2aserver.(*adapter)."
)

// TestClassify: each rule of the owner walk, one stack each.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		stack        string
		who, caller  owner
		underTheStor bool
	}{
		// Allocation is charged to its caller: the store.
		{"runtime.mallocgc < runtime.growslice < " + memstore + "(*Store).List < " + adapter + "List < " + a2aGo + "a2asrv.(*handler).ListTasks < net/http.(*conn).serve", ownerStore, ownerServing, true},
		// A GC assist inside an allocation too.
		{"runtime.gcDrainN < runtime.gcAssistAlloc < runtime.mallocgc < encoding/json.(*decodeState).object < " + a2aGo + "a2asrv.(*jsonrpcHandler).ServeHTTP", ownerEncoding, ownerA2AGo, false},
		// gob under a2a-go's deep copy: encoding, called from a2a-go.
		{"reflect.Value.Field < encoding/gob.(*Encoder).encode < " + a2aGo + "internal/utils.DeepCopy[...] < " + a2aGo + "a2asrv/taskupdate.(*Manager).Process", ownerEncoding, ownerA2AGo, false},
		// GC background workers, whatever runs below them.
		{"runtime.scanobject < runtime.gcDrain < runtime.gcBgMarkWorker.func2 < runtime.systemstack < runtime.gcBgMarkWorker < runtime.goexit", ownerGC, ownerNone, false},
		{"runtime.(*pageAlloc).scavenge < runtime.bgscavenge < runtime.goexit", ownerGC, ownerNone, false},
		// The scheduler: no owner frame at all.
		{"runtime.futex < runtime.notesleep < runtime.stopm < runtime.findRunnable < runtime.schedule < runtime.park_m < runtime.mcall", ownerOther, ownerNone, false},
		// Syscalls and the net package go to the first owner above them.
		{"syscall.Syscall6 < internal/poll.(*FD).Read < net.(*conn).Read < bufio.(*Reader).fill < net/http.(*conn).readRequest < net/http.(*conn).serve", ownerTransport, ownerNone, false},
		{"syscall.Syscall6 < golang.org/x/net/http2.(*Framer).ReadFrame < google.golang.org/grpc/internal/transport.(*http2Server).HandleStreams", ownerTransport, ownerNone, false},
		// An inlined frame decides inside its location: the store's
		// function inlined into the adapter's.
		{"runtime.memmove < " + adapter + "List+" + memstore + "(*Store).page < " + a2aGo + "a2asrv.(*handler).ListTasks", ownerStore, ownerServing, true},
		// cmd/a2astore-server is package main; a third-party library (pgx)
		// is charged to the store that calls it.
		{"main.(*syntheticAgent).Execute < " + a2aGo + "a2asrv.(*executor).run", ownerServing, ownerA2AGo, false},
		{"github.com/jackc/pgx/v5/pgproto3.(*Frontend).Receive < github.com/a2astore/a2astore/pgstore.(*Store).Get < " + adapter + "Get", ownerStore, ownerServing, true},
		// a2a-go's InMemory is a2a-go, and counts as under the store.
		{"encoding/gob.(*Decoder).Decode < " + a2aGo + "a2asrv/taskstore.(*InMemory).List < " + a2aGo + "a2asrv.(*handler).ListTasks", ownerEncoding, ownerA2AGo, true},
		// Protobuf is the gRPC owner's.
		{"google.golang.org/protobuf/internal/impl.(*MessageInfo).marshal < google.golang.org/grpc.(*Server).sendResponse", ownerTransport, ownerNone, false},
	} {
		p := synthProfile(t, map[string]int64{tc.stack: 1e7})
		who, caller := classify(p.Sample[0].Location)
		if who != tc.who || caller != tc.caller || underStore(p.Sample[0].Location) != tc.underTheStor {
			t.Errorf("%s:\n got %v from %v (under the store %v), want %v from %v (%v)", tc.stack, who, caller,
				underStore(p.Sample[0].Location), tc.who, tc.caller, tc.underTheStor)
		}
	}
}

// TestSplitProfile: a synthetic profile written and read back is split
// into owners by CPU (not sample count), with callers per owner.
func TestSplitProfile(t *testing.T) {
	p := synthProfile(t, map[string]int64{
		"runtime.mallocgc < " + memstore + "(*Store).List < " + adapter + "List":                  30e6,
		"encoding/gob.(*Encoder).Encode < " + a2aGo + "internal/utils.DeepCopy":                   50e6,
		"encoding/json.Marshal < main.handler":                                                    10e6,
		"runtime.scanobject < runtime.gcBgMarkWorker":                                             10e6,
		"runtime.schedule < runtime.mcall":                                                        0,
		"net/http.(*conn).serve":                                                                  0,
		"github.com/tidwall/btree.(*BTreeG[...]).Ascend < " + memstore + "(*Store).List < main.x": 0,
	})
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	read, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	c, err := splitProfile(read)
	if err != nil {
		t.Fatal(err)
	}
	want := [numOwners]int64{ownerStore: 30e6, ownerEncoding: 60e6, ownerGC: 10e6}
	if c.Owner != want || c.Total != 100e6 || c.Store != 30e6 || c.Duration.Seconds() != 2 {
		t.Fatalf("split %+v, want owners %v of 100 ms, 30 ms under the store, 2 s", c, want)
	}
	if c.Share(ownerEncoding) != 0.6 {
		t.Errorf("encoding share %v, want 0.6", c.Share(ownerEncoding))
	}
	if got := callersCell(c, ownerEncoding); got != "a2a-go 83.3 %, a2astore serving layer 16.7 %" {
		t.Errorf("encoding called from %q", got)
	}
	if got := callersCell(c, ownerGC); got != "—" {
		t.Errorf("GC, with nothing above, called from %q", got)
	}
	if got := callersCell(c, ownerA2AGo); got != "—" {
		t.Errorf("a2a-go, with no CPU, called from %q", got)
	}
	heap := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}}
	if _, err := splitProfile(heap); err == nil {
		t.Error("a heap profile was split as CPU")
	}
}

func TestFuncPackage(t *testing.T) {
	for name, want := range map[string]string{
		"net/http.(*conn).serve":                                               "net/http",
		"main.(*server).serve.func1":                                           "main",
		"runtime.mallocgc":                                                     "runtime",
		"encoding/json.(*decodeState).object":                                  "encoding/json",
		"slices.SortFunc[go.shape.*uint8,x.y]":                                 "slices",
		"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore.(*InMemory).List":    "github.com/a2aproject/a2a-go/v2/a2asrv/taskstore",
		"github.com/tidwall/btree.(*BTreeG[go.shape.struct { a/b.c }]).Ascend": "github.com/tidwall/btree",
		"gopkg.in/yaml%2ev3.Unmarshal":                                         "gopkg.in/yaml%2ev3",
	} {
		if got := funcPackage(name); got != want {
			t.Errorf("funcPackage(%q) = %q, want %q", name, got, want)
		}
	}
}
