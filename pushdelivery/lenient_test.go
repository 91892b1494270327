package pushdelivery_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"

	"github.com/a2astore/a2astore/pushdelivery"
)

// failingList is a config store whose List fails while fail is set.
type failingList struct {
	push.ConfigStore
	fail bool
}

func (f *failingList) List(ctx context.Context, task a2a.TaskID) ([]*a2a.PushConfig, error) {
	if f.fail {
		return nil, errors.New("config table unavailable")
	}
	return f.ConfigStore.List(ctx, task)
}

// N2: LenientList answers a failed list with no configs and no error,
// logged once for a burst of failures, and wakes delivery for the task;
// a list that works is passed on (and wakes nothing: a2a-go's sender
// does).
func TestLenientList(t *testing.T) {
	ctx := context.Background()
	cs, _, _ := newConfigStore(t)
	if _, err := cs.Save(ctx, "t1", valid()); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var woken []a2a.TaskID
	inner := &failingList{ConfigStore: cs}
	l := pushdelivery.LenientList(inner, slog.New(slog.NewTextHandler(&logs, nil)), func(task a2a.TaskID) { woken = append(woken, task) })
	if got, err := l.List(ctx, "t1"); err != nil || len(got) != 1 || len(woken) != 0 {
		t.Fatalf("working list: %v, %v (woke %v)", got, err, woken)
	}
	inner.fail = true
	for range 3 {
		if got, err := l.List(ctx, "t1"); err != nil || got == nil || len(got) != 0 {
			t.Fatalf("failed list answered %v, %v; want an empty list, no error", got, err)
		}
	}
	if len(woken) != 3 || woken[0] != "t1" {
		t.Errorf("three failed lists woke %v, want t1 three times", woken)
	}
	if n := strings.Count(logs.String(), "config table unavailable"); n != 1 {
		t.Errorf("%d log lines for three failures in a row, want 1:\n%s", n, logs.String())
	}
}
