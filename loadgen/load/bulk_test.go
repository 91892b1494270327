package load

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/engine"
)

// cancelOnWrite cancels a context at its first write: a loadgen stopped
// after the first progress line of its initial load.
type cancelOnWrite struct {
	once   sync.Once
	cancel context.CancelFunc
	b      strings.Builder
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	c.once.Do(c.cancel)
	return c.b.Write(p)
}

// TestInitialBulkLoad: an embedded run writes its initial tasks through
// the store's bulk path (Pebble: its Importer) with progress lines, and
// a loadgen stopped during that load and started again on the same
// directory and seed resumes it — the tasks written are found, the rest
// written — and then runs clean over them, its report giving the load.
func TestInitialBulkLoad(t *testing.T) {
	dir := t.TempDir()
	seed := testSeed(t)
	ctx, cancel := context.WithCancel(t.Context())
	stop := &cancelOnWrite{cancel: cancel}
	cfg := Config{Target: "pebble", Dir: dir, PebbleNoSync: true, Seed: seed, Initial: 2500, Ops: 300, Concurrency: 4,
		Registry: prometheus.NewRegistry(), Progress: stop, ProgressInterval: 1}
	cfg.Shape.Contexts = 20
	if _, err := Run(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("run stopped during its load: %v, want canceled", err)
	}
	if !strings.Contains(stop.b.String(), "bulk load: 1000/2500 tasks (40.0%)") {
		t.Errorf("progress of the stopped load:\n%s", stop.b.String())
	}
	cfg.Progress, cfg.Registry = nil, prometheus.NewRegistry()
	cfg.Seed++
	if _, err := Run(t.Context(), cfg); !errors.Is(err, engine.ErrAlreadyExists) {
		t.Fatalf("resumed with another seed: %v, want the store refused as another data set's", err)
	}
	cfg.Seed, cfg.Registry = seed, prometheus.NewRegistry()
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	assertClean(t, res)
	if l := res.Load; l == nil || l.Path != "import" || l.Found != 1000 || l.Written != 1500 || l.TasksPerSec <= 0 {
		t.Fatalf("resumed load: %+v, want import, 1000 found, 1500 written", l)
	}
	var b strings.Builder
	if err := res.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "initial load: 2500 tasks by import (1500 written, 1000 found from a stopped load)") {
		t.Errorf("report lacks the load:\n%s", b.String())
	}
}
