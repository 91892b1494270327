package load

import (
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
