package pushdelivery

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
)

// LenientList returns cs for a2asrv.WithPushNotifications outside cluster
// mode (SPEC N2): after every event it stores, a2a-go v2.3.1 lists the
// task's configs only to hand each to the push sender, and fails the task
// when the list fails. Push delivery needs nothing from that list — the
// event is in the task's log, and the worker delivers it to the task's
// configs from there — so a failed list is logged (at most once a
// minute, with the store's error: a list error names no token or
// credentials) and answered with no configs: no task fails for it, and
// wake (the worker's Wake, when not nil) is told of the task, so delivery
// catches up at once rather than at the outbox's next rescan (the sender
// a2a-go calls with each listed config is what wakes the worker after a
// list that works). In cluster mode use
// pgcluster.FencePushConfigs instead, which retries the execution.
//
// Its List answers a2a-go's ListTaskPushConfigs too: install
// a2aserver.PushConfigPages, which answers that call before a2a-go's
// handler, so that a client's listing still sees the error.
func LenientList(cs push.ConfigStore, logger *slog.Logger, wake func(a2a.TaskID)) push.ConfigStore {
	if logger == nil {
		logger = slog.Default()
	}
	if wake == nil {
		wake = func(a2a.TaskID) {}
	}
	return &lenientList{ConfigStore: cs, logger: logger, wake: wake}
}

type lenientList struct {
	push.ConfigStore
	logger *slog.Logger
	wake   func(a2a.TaskID)
	logged atomic.Int64 // unix nanoseconds of the last failure logged
}

// lenientLogEvery spaces the log lines of failed lists.
const lenientLogEvery = time.Minute

// List implements push.ConfigStore.
func (l *lenientList) List(ctx context.Context, task a2a.TaskID) ([]*a2a.PushConfig, error) {
	configs, err := l.ConfigStore.List(ctx, task)
	if err == nil {
		return configs, nil
	}
	now, last := time.Now().UnixNano(), l.logged.Load()
	if now-last >= int64(lenientLogEvery) && l.logged.CompareAndSwap(last, now) {
		l.logger.Warn("pushdelivery: listing a task's push configs after an event failed; the task goes on, delivery catches up from its log",
			"task", task, "error", err)
	}
	l.wake(task)
	return []*a2a.PushConfig{}, nil
}
