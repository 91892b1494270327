package main

import (
	"context"
	"errors"
	"flag"

	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine"
)

// The benchmark lab's peer (-a2a-inmemory, results/run.sh): the same
// server — listeners, interceptors, agent, a2a-go handler — with a2a-go's
// own taskstore.InMemory as the handler's task store instead of
// a2astore's, so CPU per request can be compared side by side on the same
// workload. For measurement only: tasks are not persisted, ListTasks
// sorts and copies every task per call, and SubscribeToTask is a2a-go's
// own (a running execution only), not the task log's (W9). The a2astore
// backend is still opened (mem) but serves no request.

// a2aInMemoryFlag registers -a2a-inmemory.
func a2aInMemoryFlag(fs *flag.FlagSet, on *bool) {
	fs.BoolVar(on, "a2a-inmemory", false, "benchmark lab only: serve from a2a-go's taskstore.InMemory instead of a2astore's store, to compare their CPU per request (no persistence, no log-based subscriptions; needs -backend mem, -policy none, no -cluster or -retain)")
}

// errInMemoryFlags is -a2a-inmemory with a flag it cannot honour.
var errInMemoryFlags = errors.New("-a2a-inmemory (a2a-go's taskstore.InMemory, for measurement only) needs -backend mem, -policy none, and no -cluster, -retain or -retain-once")

// checkA2AInMemory refuses -a2a-inmemory with what only a2astore's store
// does: other backends, a policy, cluster mode, retention.
func checkA2AInMemory(cfg *config) error {
	if !cfg.A2AInMemory {
		return nil
	}
	if (cfg.Backend != "" && cfg.Backend != "mem") || (cfg.Policy != "" && cfg.Policy != "none") ||
		cfg.Cluster.Enabled || cfg.Retain.Age != 0 || cfg.Retain.Once {
		return errInMemoryFlags
	}
	cfg.Logger.Warn("serving from a2a-go's taskstore.InMemory: for measurement only (no persistence, no log-based subscriptions)")
	return nil
}

// inMemoryUser is the one user a2a-go's InMemory records and lists
// (its List refuses an empty user name).
const inMemoryUser = "a2astore-lab"

// handlerTaskStore is the task store the a2a-go handler uses: a2astore's
// store through the adapter, or with -a2a-inmemory a2a-go's InMemory.
func (s *server) handlerTaskStore(store engine.Store) taskstore.Store {
	if s.cfg.A2AInMemory {
		return taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{
			Authenticator: func(context.Context) (string, error) { return inMemoryUser, nil },
		})
	}
	return a2aserver.TaskStore(store)
}

// subscriptions makes h answer SubscribeToTask from the task log (W9),
// but with -a2a-inmemory: that store's tasks are not in the log, so a2a-go
// answers from its running executions, as it does by default.
func (s *server) subscriptions(h a2asrv.RequestHandler, ts taskstore.Store, logs engine.LogStore) (a2asrv.RequestHandler, error) {
	if s.cfg.A2AInMemory {
		return h, nil
	}
	return a2aserver.SubscribeFromLog(h, ts, logs, s.cfg.Cluster.Poll)
}
