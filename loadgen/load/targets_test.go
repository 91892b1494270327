package load

import "testing"

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
