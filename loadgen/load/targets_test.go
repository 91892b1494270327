package load

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2astore/a2astore/engine/memstore"
)

// Several server URLs make one remote target; each must be an http(s) URL.
func TestValidateTargets(t *testing.T) {
	for _, tc := range []struct {
		target string
		ok     bool
	}{
		{"http://a:1,http://b:2", true},
		{"http://a:1", true},
		{"http://a:1,ftp://b", false},
		{"http://a:1,", false},
	} {
		cfg := Config{Target: tc.target}
		cfg.EnsureDefaults()
		if err := cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%q) = %v, want ok %v", tc.target, err, tc.ok)
		}
	}
}

// -log opens the store loadgen opens with its log: refused for a server,
// whose log is its own, and for a store handed in.
func TestValidateLog(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{Target: "mem", Log: true}, true},
		{Config{Target: "pebble", Log: true}, true},
		{Config{Target: "pg", DSN: "postgres://localhost/x", Log: true}, true},
		{Config{Target: "http://a:1"}, true},
		{Config{Target: "http://a:1", Log: true}, false},
		{Config{Target: "mem", Store: memstore.New(memstore.Options{}), Log: true}, false},
	} {
		cfg := tc.cfg
		cfg.EnsureDefaults()
		if err := cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(target %q, store %v, log) = %v, want ok %v", tc.cfg.Target, tc.cfg.Store != nil, err, tc.ok)
		}
	}
}

// A run with the task log says so, in its table's first line, its JSON
// and its benchmark lines' names, so that runs with and without it are
// told apart.
func TestReportSaysLog(t *testing.T) {
	var b strings.Builder
	res := &Result{Target: "mem", Workload: "read-heavy", Log: true}
	if err := res.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(b.String(), "\n")
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var bench strings.Builder
	if err := res.WriteBench(&bench); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first, " log=on ") || !strings.Contains(string(js), `"log":true`) || !strings.Contains(bench.String(), "BenchmarkLoadgen/target=mem+log/") {
		t.Fatalf("the report of a logged run: %q, %s, %q", first, js, bench.String())
	}
}
