package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReferenceUpToDate builds the commands, runs each with -h and
// compares the page it makes with the committed docs/flags.md.
func TestReferenceUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	got, err := generate(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, committed) {
		return
	}
	g, c := strings.Split(string(got), "\n"), strings.Split(string(committed), "\n")
	for i := 0; i < len(g) || i < len(c); i++ {
		if i >= len(g) || i >= len(c) || g[i] != c[i] {
			t.Fatalf("%s is out of date (first difference at line %d):\n  committed: %q\n  commands:  %q\nrun: go run ./cmd/flagref", page, i+1, at(c, i), at(g, i))
		}
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end of page)"
}

// TestUsage checks the clean-up of one command's -h output.
func TestUsage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	script := "#!/bin/sh\necho \"Usage of " + bin + ":\" >&2\necho '  -x int' >&2\necho 'tool: flag: help requested' >&2\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := usage(context.Background(), bin)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Usage of tool:\n  -x int\n"; got != want {
		t.Errorf("usage = %q, want %q", got, want)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := usage(context.Background(), bin); err == nil {
		t.Error("a command that prints no usage passed")
	}
}
