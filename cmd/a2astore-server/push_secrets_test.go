package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pushdelivery"
)

// The secrets planted in these tests' configs: neither may appear in a
// client's answer or in a log line at any level (SPEC N3).
const (
	plantedToken = "planted-token-5b1f"
	plantedCred  = "planted-cred-9c2e"
	// plantedQuery is a secret of the webhook's URL (review D): logs
	// name no more of a URL than its host.
	plantedQuery = "planted-query-7d3a"
)

// secretConfig is a valid config of task carrying both planted secrets.
func secretConfig(task a2a.TaskID, id string) *a2a.PushConfig {
	return &a2a.PushConfig{TaskID: task, ID: id, URL: "https://hook.example/s?sig=" + plantedQuery, Token: plantedToken,
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: plantedCred}}
}

// faultOutbox is the server's outbox with faults a test arms: saves of a
// config carrying plantedToken go through beforeSave first (its error is
// the save's), and List fails while failList is set.
type faultOutbox struct {
	pushdelivery.Outbox
	beforeSave func(ctx context.Context, o pushdelivery.Outbox, r *pushdelivery.Record) error
	saves      atomic.Int32 // saves of a planted config that reached the outbox
	failList   atomic.Bool
	lists      atomic.Int32 // failed lists
}

func (o *faultOutbox) Save(ctx context.Context, r *pushdelivery.Record) error {
	if r.Config.Token == plantedToken {
		o.saves.Add(1)
		if o.beforeSave != nil {
			if err := o.beforeSave(ctx, o.Outbox, r); err != nil {
				return err
			}
		}
	}
	return o.Outbox.Save(ctx, r)
}

func (o *faultOutbox) List(ctx context.Context, task a2a.TaskID, after string, limit int) ([]*pushdelivery.Record, error) {
	if o.failList.Load() {
		o.lists.Add(1)
		return nil, errors.New("push config table unavailable")
	}
	return o.Outbox.List(ctx, task, after, limit)
}

// Touch passes the worker's wake on (pushdelivery.Toucher).
func (o *faultOutbox) Touch(task a2a.TaskID) {
	if t, ok := o.Outbox.(pushdelivery.Toucher); ok {
		t.Touch(task)
	}
}

// startFaultServer starts a TCK-agent server on backend over fo, logging
// every level into the returned buffer.
func startFaultServer(t *testing.T, backend string, fo *faultOutbox) (*testServer, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	cfg := config{Backend: backend, AgentName: agentTCK, Push: pushOn,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if backend == "pg" {
		cfg.PGDSN = pgtest.DSN(t)
	}
	cfg.Push.wrapOutbox = func(o pushdelivery.Outbox) pushdelivery.Outbox { fo.Outbox = o; return fo }
	return startServer(t, cfg), logs
}

// heldTask is a task of the TCK agent waiting for input (not terminal).
func heldTask(t *testing.T, c *a2aclient.Client, name string) *a2a.Task {
	t.Helper()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("wait"))
	msg.ID = "tck-input-required-" + name
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg})
	task, ok := res.(*a2a.Task)
	if err != nil || !ok {
		t.Fatalf("%s: send: %v, %v", name, res, err)
	}
	return task
}

// withConfigs gives task n plain configs c0… over c.
func withConfigs(t *testing.T, c *a2aclient.Client, task a2a.TaskID, n int) {
	t.Helper()
	for i := range n {
		if _, err := c.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: task, ID: "c" + strconv.Itoa(i), URL: "https://hook.example/"}); err != nil {
			t.Fatalf("create config %d: %v", i, err)
		}
	}
}

// create is CreateTaskPushConfig's error.
func create(t *testing.T, c *a2aclient.Client, cfg *a2a.PushConfig) error {
	_, err := c.CreateTaskPushConfig(t.Context(), cfg)
	return err
}

// sendWithSecrets continues task (a new task when nil) with a message
// carrying a planted config.
func sendWithSecrets(t *testing.T, c *a2aclient.Client, task *a2a.Task, name string) error {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("more"))
	msg.ID = "tck-input-required-next-" + name
	if task != nil {
		msg.TaskID, msg.ContextID = task.ID, task.ContextID
	}
	_, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg,
		Config: &a2a.SendMessageConfig{PushConfig: secretConfig("", "")}})
	return err
}

// refusedQuietly runs call, which must fail: neither its error nor a
// log line written meanwhile names a planted secret.
func refusedQuietly(t *testing.T, where string, logs *syncBuffer, call func() error) {
	t.Helper()
	mark := len(logs.String())
	err := call()
	if err == nil {
		t.Errorf("%s: accepted", where)
		return
	}
	for _, s := range []string{plantedToken, plantedCred, plantedQuery} {
		if strings.Contains(fmt.Sprintf("%v %+v", err, err), s) {
			t.Errorf("%s: the client's error shows a secret: %v", where, err)
		}
		if line := logs.String()[mark:]; strings.Contains(line, s) {
			t.Errorf("%s: the log shows a secret:\n%s", where, line)
		}
	}
}

// noSecretLogged: no log line of the whole test names a planted secret
// (lines written after their call returned included).
func noSecretLogged(t *testing.T, logs *syncBuffer) {
	t.Helper()
	if l := logs.String(); strings.Contains(l, plantedToken) || strings.Contains(l, plantedCred) || strings.Contains(l, plantedQuery) {
		t.Errorf("the log shows a secret:\n%s", l)
	}
}

// N3: a push config whose save fails in the store after PushConfigCheck
// passed (a SendMessage creating or continuing a task; a
// CreateTaskPushConfig) fails without its token or credentials in the
// client's error or any log line, on every transport: a2a-go v2.3.1
// formats the config into the error of a failed SendMessage save.
func TestPushSecretsStoreFailure(t *testing.T) {
	fo := &faultOutbox{beforeSave: func(context.Context, pushdelivery.Outbox, *pushdelivery.Record) error {
		return errors.New("outbox unavailable")
	}}
	ts, logs := startFaultServer(t, "mem", fo)
	for _, tr := range transports {
		c := ts.clients[tr]
		refusedQuietly(t, string(tr)+": new task", logs, func() error { return sendWithSecrets(t, c, nil, "new-"+string(tr)) })
		task := heldTask(t, c, "store-"+string(tr))
		refusedQuietly(t, string(tr)+": continued task", logs, func() error { return sendWithSecrets(t, c, task, "store-"+string(tr)) })
		refusedQuietly(t, string(tr)+": create", logs, func() error { return create(t, c, secretConfig(task.ID, "s")) })
	}
	noSecretLogged(t, logs)
	if n := fo.saves.Load(); n != 3*int32(len(transports)) {
		t.Errorf("%d planted saves reached the outbox, want %d", n, 3*len(transports))
	}
}

// N3: a SendMessage adding a config to a task with MaxConfigsPerTask-1
// configs passes PushConfigCheck, and a concurrent create fills the task
// before its save: the refusal shows no secret. The race is played
// deterministically: the other config is saved just before the planted
// one.
func TestPushSecretsConcurrentSave(t *testing.T) {
	fo := &faultOutbox{beforeSave: func(ctx context.Context, o pushdelivery.Outbox, r *pushdelivery.Record) error {
		racer := &pushdelivery.Record{TaskID: r.TaskID, Config: a2a.PushConfig{TaskID: r.TaskID, ID: "racer", URL: "https://hook.example/r"},
			Dest: "https://hook.example:443", Created: r.Created, NextAt: r.NextAt, Delivered: r.Delivered}
		return o.Save(ctx, racer)
	}}
	ts, logs := startFaultServer(t, "mem", fo)
	for _, tr := range transports {
		c := ts.clients[tr]
		task := heldTask(t, c, "race-"+string(tr))
		withConfigs(t, c, task.ID, pushdelivery.MaxConfigsPerTask-1)
		refusedQuietly(t, string(tr), logs, func() error { return sendWithSecrets(t, c, task, "race-"+string(tr)) })
	}
	noSecretLogged(t, logs)
	if n := fo.saves.Load(); n != int32(len(transports)) {
		t.Errorf("%d planted saves reached the outbox, want %d (PushConfigCheck refused them first?)", n, len(transports))
	}
}

// N3: the cap's refusal (PushConfigCheck's for a SendMessage, the save's
// for a CreateTaskPushConfig) shows no secret either.
func TestPushSecretsCapRefusal(t *testing.T) {
	ts, logs := startFaultServer(t, "mem", &faultOutbox{})
	for _, tr := range transports {
		c := ts.clients[tr]
		task := heldTask(t, c, "cap-"+string(tr))
		withConfigs(t, c, task.ID, pushdelivery.MaxConfigsPerTask)
		refusedQuietly(t, string(tr)+": send", logs, func() error {
			err := sendWithSecrets(t, c, task, "cap-"+string(tr))
			if !errors.Is(err, a2a.ErrInvalidParams) {
				t.Errorf("%s: send over the cap: %v, want InvalidParams", tr, err)
			}
			return err
		})
		refusedQuietly(t, string(tr)+": create", logs, func() error { return create(t, c, secretConfig(task.ID, "s")) })
	}
	noSecretLogged(t, logs)
}

// N2 outside cluster mode: when a2a-go's lookup of a task's push configs
// after an event fails (the config table unavailable), the task is not
// failed; its events are in the log and reach the webhook anyway. On
// every backend; the config is saved before the lookups start failing.
func TestPushLookupFailureFailsNoTask(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg config) {
		fo := &faultOutbox{}
		fo.beforeSave = func(context.Context, pushdelivery.Outbox, *pushdelivery.Record) error {
			fo.failList.Store(true)
			return nil
		}
		cfg.Push = pushOn
		cfg.Push.wrapOutbox = func(o pushdelivery.Outbox) pushdelivery.Outbox { fo.Outbox = o; return fo }
		cfg.Agent = agentConfig{StatusUpdates: 2}
		ts := startServer(t, cfg)
		recv := newReceiver(t)
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("push me"))
		res, err := ts.clients[a2a.TransportProtocolJSONRPC].SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg,
			Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: recv.URL + "/hook", Token: plantedToken}}})
		if err != nil {
			t.Fatalf("SendMessage: %v", err)
		}
		task := res.(*a2a.Task)
		if task.Status.State != a2a.TaskStateCompleted {
			t.Errorf("task %s after failed config lookups, want completed", task.Status.State)
		}
		if fo.lists.Load() == 0 {
			t.Fatal("setup: no config lookup failed")
		}
		checkInOrder(t, "after failed lookups", recv.deliveriesOf(t, task.ID), plantedToken)
	})
}
