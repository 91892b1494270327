package pgcluster

import (
	"context"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"
)

// ListenerApplicationName prefixes the application_name of an instance's
// notification connection (then a space and Options.Instance), so that
// operators — and tests — can find it in pg_stat_activity.
const ListenerApplicationName = "a2astore-cluster-listener"

// listener holds the instance's one LISTEN connection and dispatches
// notifications: a log entry wakes the readers of its task (through the
// store's watch), work wakes the work loop, a finished cancelation
// cancels the local execution of its task, a finished execution wakes a
// follow-up message waiting for it. When the connection drops it
// reconnects (backing off up to 1 s), wakes every reader, waiter and the
// work loop, which catch up from the tables, and looks at the state of
// the tasks executing here, which a cancel may have ended meanwhile: a
// notification sent while it was away is not needed.
type listener struct {
	service
	c         *Cluster
	connected chan struct{} // closed once the first LISTEN is in place
}

func newListener(c *Cluster) *listener {
	l := &listener{c: c, connected: make(chan struct{})}
	l.init()
	return l
}

// Start starts listening.
func (l *listener) Start() { l.start(l.loop) }

func (l *listener) loop(ctx context.Context) {
	backoff := 10 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		err := l.session(ctx, func() {
			backoff = 10 * time.Millisecond
			if first {
				first = false
				close(l.connected)
			} else {
				l.c.stats.Reconnects.Add(1)
			}
			l.c.opts.Log.WakeAllLogs()
			l.c.work.notify()
			l.c.work.doneHub.WakeAll()
			l.c.work.cancelHub.WakeAll()
			// A cancel notified while the connection was away is in
			// the table: look at the tasks running here (K8).
			go l.c.work.recheck(ctx)
		})
		if ctx.Err() != nil {
			return
		}
		l.c.opts.Logger.Warn("pgcluster: notification connection lost; reconnecting", "error", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
		if f := l.c.beforeReconnect.Load(); f != nil {
			(*f)()
		}
	}
}

// session connects, listens and dispatches until the connection fails.
func (l *listener) session(ctx context.Context, onListen func()) error {
	cfg := l.c.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ListenerApplicationName + " " + l.c.opts.Instance
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "LISTEN "+quoteIdent(channel(l.c.opts.Schema))); err != nil {
		return err
	}
	onListen()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.c.stats.Notifications.Add(1)
		l.dispatch(n.Payload)
	}
}

func (l *listener) dispatch(payload string) {
	if payload == "" {
		return
	}
	kind, task := payload[0], a2a.TaskID(payload[1:])
	switch kind {
	case 'e':
		if task == "" {
			l.c.opts.Log.WakeAllLogs()
		} else {
			l.c.opts.Log.WakeLog(task)
		}
	case 'w':
		l.c.work.notify()
	case 'c':
		if task != "" {
			l.c.work.cancelLocal(task)
			l.c.work.cancelHub.Wake(task)
		} else {
			l.c.work.cancelHub.WakeAll()
		}
	case 'd':
		if task == "" {
			l.c.work.doneHub.WakeAll()
			l.c.work.cancelHub.WakeAll()
		} else {
			l.c.work.doneHub.Wake(task)
		}
	}
}
