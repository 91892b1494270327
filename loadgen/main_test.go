package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := run([]string{"-ops", "300", "-initial", "100", "-seed", "3", "-quiet", "-bench", "-json", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", code, stderr.String(), stdout.String())
	}
	for _, want := range []string{"seed=3", "p99.9 ms", "\n     total", "0 violations",
		"BenchmarkLoadgen/target=mem/workload=traversal-under-churn/op=total-8\t300\t"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Seed  uint64 `json:"seed"`
		Total struct {
			Count int64 `json:"count"`
		} `json:"total"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Seed != 3 || res.Total.Count != 300 {
		t.Errorf("JSON result: seed %d count %d, want 3 and 300", res.Seed, res.Total.Count)
	}
}

func TestCommandUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-workload", "nope"},
		{"-target", "pg"}, // no DSN
		{"-target", "http://127.0.0.1:1", "-transport", "carrier-pigeon"},
		{"-page-size", "101"},
		{"-push-receiver", "127.0.0.1:0"}, // push needs a remote target
		{"-target", "http://127.0.0.1:1", "-push-receiver", "0.0.0.0:9200"},
		{"-target", "http://127.0.0.1:1", "-push-receiver", "127.0.0.1:0", "-push-down", "5m", "-push-every", "5m"},
		{"-no-such-flag"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr.String())
		}
	}
}

// -trace writes the flight recorder's window as an execution trace.
func TestCommandTrace(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run.trace")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-ops", "200", "-initial", "100", "-seed", "3", "-quiet", "-trace", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if head, _, ok := bytes.Cut(b, []byte(" trace\x00")); !ok || !bytes.HasPrefix(head, []byte("go 1.")) || len(b) < 1024 {
		t.Errorf("-trace wrote %d bytes starting %q, not an execution trace", len(b), b[:min(len(b), 16)])
	}
}
