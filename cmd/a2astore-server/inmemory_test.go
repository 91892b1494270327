package main

import (
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// TestA2AInMemory: with -a2a-inmemory the same server serves SendMessage,
// GetTask and ListTasks on every transport from a2a-go's InMemory, and
// a2astore's store sees none of it.
func TestA2AInMemory(t *testing.T) {
	ts := startServer(t, config{Backend: "mem", A2AInMemory: true})
	var ids []a2a.TaskID
	for _, tr := range transports {
		task := send(t, ts.clients[tr], "ctx-lab", "hello "+string(tr))
		if task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("%s: task %s is %s, want completed", tr, task.ID, task.Status.State)
		}
		ids = append(ids, task.ID)
	}
	for _, tr := range transports {
		got, err := ts.clients[tr].GetTask(t.Context(), &a2a.GetTaskRequest{ID: ids[0]})
		if err != nil || got.ID != ids[0] {
			t.Fatalf("%s GetTask: %v %v", tr, got, err)
		}
		list, err := ts.clients[tr].ListTasks(t.Context(), &a2a.ListTasksRequest{ContextID: "ctx-lab", PageSize: 10})
		if err != nil || len(list.Tasks) != len(ids) || list.TotalSize != len(ids) {
			t.Fatalf("%s ListTasks: %+v %v; want the %d tasks sent", tr, list, err, len(ids))
		}
	}
	resp, err := ts.backend.List(t.Context(), &engine.ListRequest{IncludeTotalSize: true, PageSize: 1})
	if err != nil || resp.TotalSize != 0 {
		t.Errorf("a2astore's store holds %d tasks (%v); want none with -a2a-inmemory", resp.TotalSize, err)
	}
}

// TestA2AInMemoryRefusesStoreFeatures: -a2a-inmemory with what only
// a2astore's store does is refused at start.
func TestA2AInMemoryRefusesStoreFeatures(t *testing.T) {
	for _, cfg := range []config{
		{Backend: "pebble", PebbleDir: t.TempDir()},
		{Backend: "mem", Policy: "owner", CallerHeader: "X-Caller"},
		{Backend: "mem", Retain: retainConfig{Age: time.Hour}},
		{Backend: "mem", Cluster: clusterConfig{Enabled: true}},
	} {
		cfg.A2AInMemory = true
		cfg.HTTPAddr, cfg.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
		if s, err := newServer(t.Context(), cfg); !errors.Is(err, errInMemoryFlags) {
			if s != nil {
				_ = s.shutdown(t.Context())
			}
			t.Errorf("%+v: %v, want %v", cfg, err, errInMemoryFlags)
		}
	}
}
