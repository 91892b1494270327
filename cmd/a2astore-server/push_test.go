package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/a2astore/a2astore/pushdelivery"
)

// pushOn is the push part of a test server's config: delivery to the
// loopback receivers of these tests.
var pushOn = pushConfig{Enabled: true, AllowPrivate: true, Deadline: time.Hour, Workers: 2, PerDest: 2}

// delivery is one POST a receiver took.
type delivery struct {
	task        a2a.TaskID
	revision    int64
	state       a2a.TaskState // the task's or status update's state; "" for an artifact
	contentType string
	token       string
}

// receiver is a webhook that records deliveries; while failing it answers
// 503 and counts the attempt.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	got      []delivery
	failed   int
	failing  bool
	changed  chan struct{} // closed and replaced at every request
	badInput []string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{changed: make(chan struct{})}
	r.Server = httptest.NewServer(r)
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer func() { close(r.changed); r.changed = make(chan struct{}); r.mu.Unlock() }()
	if r.failing {
		r.failed++
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	d := delivery{contentType: req.Header.Get("Content-Type"), token: req.Header.Get("A2A-Notification-Token")}
	rev, err := strconv.ParseInt(req.Header.Get("A2A-Task-Revision"), 10, 64)
	var sr a2a.StreamResponse
	if err != nil || json.Unmarshal(body, &sr) != nil {
		r.badInput = append(r.badInput, string(body))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	d.revision = rev
	switch ev := sr.Event.(type) {
	case *a2a.Task:
		d.task, d.state = ev.ID, ev.Status.State
	case *a2a.TaskStatusUpdateEvent:
		d.task, d.state = ev.TaskID, ev.Status.State
	case *a2a.TaskArtifactUpdateEvent:
		d.task = ev.TaskID
	}
	r.got = append(r.got, d)
}

func (r *receiver) setFailing(v bool) { r.mu.Lock(); r.failing = v; r.mu.Unlock() }

// waitFor waits until cond holds on the receiver's state (under its lock)
// or the test's time is up.
func (r *receiver) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		r.mu.Lock()
		ok, ch := cond(), r.changed
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("receiver: %s did not happen", what)
		}
	}
}

// deliveriesOf returns task's deliveries once its terminal one arrived.
func (r *receiver) deliveriesOf(t *testing.T, task a2a.TaskID) []delivery {
	t.Helper()
	var out []delivery
	r.waitFor(t, "terminal delivery of "+string(task), func() bool {
		out = out[:0]
		for _, d := range r.got {
			if d.task == task {
				out = append(out, d)
			}
		}
		return len(out) > 0 && out[len(out)-1].state.Terminal()
	})
	return out
}

// checkInOrder: each delivery of the task in strictly increasing revision
// (none repeated in a run without failures), as application/a2a+json with
// the config's token.
func checkInOrder(t *testing.T, where string, got []delivery, token string) {
	t.Helper()
	for i, d := range got {
		if d.contentType != "application/a2a+json" || d.token != token {
			t.Errorf("%s: delivery %d has content type %q, token %q", where, i, d.contentType, d.token)
		}
		if i > 0 && d.revision <= got[i-1].revision {
			t.Errorf("%s: revision %d after %d", where, d.revision, got[i-1].revision)
		}
	}
}

// N2 end to end: a task sent with a push config on any transport and any
// backend has every event delivered to its webhook, in order, the
// terminal one last; the agent card declares push notifications.
func TestPushDelivered(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg config) {
		cfg.Push = pushOn
		cfg.Agent = agentConfig{StatusUpdates: 2, HistoryMessages: 1, ArtifactBytes: 16}
		ts := startServer(t, cfg)
		if !ts.card.Capabilities.PushNotifications {
			t.Fatal("agent card does not declare push notifications")
		}
		recv := newReceiver(t)
		for _, tr := range transports {
			token := "tok-" + string(tr)
			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("push me"))
			res, err := ts.clients[tr].SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg,
				Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: recv.URL + "/hook", Token: token}}})
			if err != nil {
				t.Fatalf("%s: SendMessage: %v", tr, err)
			}
			task := res.(*a2a.Task)
			got := recv.deliveriesOf(t, task.ID)
			checkInOrder(t, string(tr), got, token)
			if len(got) < 3 {
				t.Errorf("%s: %d deliveries, want the submitted task, its updates and the completion", tr, len(got))
			}
		}
		recv.mu.Lock()
		defer recv.mu.Unlock()
		if len(recv.badInput) > 0 {
			t.Errorf("deliveries that are not A2A StreamResponses with a revision: %q", recv.badInput)
		}
	})
}

// N2 across a restart: events a webhook refused before the server stopped
// are delivered by the next server on the same Pebble directory.
func TestPushSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := config{Backend: "pebble", PebbleDir: dir, Push: pushOn}
	recv := newReceiver(t)
	recv.setFailing(true)
	ts := startServer(t, cfg)
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("before restart"))
	res, err := ts.clients[a2a.TransportProtocolJSONRPC].SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg,
		Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: recv.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	recv.waitFor(t, "a refused attempt", func() bool { return recv.failed > 0 })
	sctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := ts.shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	recv.setFailing(false)
	startServer(t, cfg)
	got := recv.deliveriesOf(t, task.ID)
	checkInOrder(t, "after restart", got, "")
}

// N1: push configs through every transport: create, get, list by pages
// with the store's own token, delete; a config is found only under its
// task.
func TestPushConfigMethods(t *testing.T) {
	ts := startServer(t, config{Backend: "mem", Push: pushOn})
	for _, tr := range transports {
		c := ts.clients[tr]
		task := send(t, c, "", "configs over "+string(tr))
		other := send(t, c, "", "other task")
		for _, id := range []string{"a", "b", "c"} {
			if _, err := c.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: task.ID, ID: id, URL: "https://hook.example/" + id}); err != nil {
				t.Fatalf("%s: create %s: %v", tr, id, err)
			}
		}
		got, err := c.GetTaskPushConfig(t.Context(), &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "b"})
		if err != nil || got.URL != "https://hook.example/b" {
			t.Errorf("%s: get b = %+v, %v", tr, got, err)
		}
		if _, err := c.GetTaskPushConfig(t.Context(), &a2a.GetTaskPushConfigRequest{TaskID: other.ID, ID: "b"}); err == nil {
			t.Errorf("%s: config b found under another task", tr)
		}
		if err := c.DeleteTaskPushConfig(t.Context(), &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "c"}); err != nil {
			t.Errorf("%s: delete c: %v", tr, err)
		}
		ids := listAllPushConfigs(t, ts, tr, task.ID)
		if len(ids) != 2 || ids[0] != "a" || ids[1] != "b" {
			t.Errorf("%s: listed by pages of one: %v, want [a b]", tr, ids)
		}
	}
	task := send(t, ts.clients[a2a.TransportProtocolHTTPJSON], "", "bad page size")
	code, body := restGet(t, ts, "/tasks/"+url.PathEscape(string(task.ID))+"/pushNotificationConfigs", url.Values{"pageSize": {"x"}})
	if code != http.StatusBadRequest {
		t.Errorf("HTTP+JSON: pageSize=x: %d %s, want 400", code, body)
	}
}

// listAllPushConfigs lists task's configs one per page over tr, following
// nextPageToken (a2a-go's client drops it, so the wire is spoken here).
func listAllPushConfigs(t *testing.T, ts *testServer, tr a2a.TransportProtocol, task a2a.TaskID) []string {
	t.Helper()
	var ids []string
	token := ""
	for range 10 {
		var page struct {
			Configs []struct {
				ID string `json:"id"`
			} `json:"configs"`
			NextPageToken string `json:"nextPageToken"`
		}
		switch tr {
		case a2a.TransportProtocolGRPC:
			resp, err := ts.pb.ListTaskPushNotificationConfigs(t.Context(), &a2apb.ListTaskPushNotificationConfigsRequest{TaskId: string(task), PageSize: 1, PageToken: token})
			if err != nil {
				t.Fatalf("grpc list: %v", err)
			}
			for _, c := range resp.GetConfigs() {
				page.Configs = append(page.Configs, struct {
					ID string `json:"id"`
				}{c.GetId()})
			}
			page.NextPageToken = resp.GetNextPageToken()
		case a2a.TransportProtocolJSONRPC:
			var out struct {
				Result json.RawMessage `json:"result"`
			}
			body := jsonrpcCall(t, ts, "ListTaskPushNotificationConfigs", map[string]any{"taskId": task, "pageSize": 1, "pageToken": token})
			if json.Unmarshal(body, &out) != nil || json.Unmarshal(out.Result, &page) != nil {
				t.Fatalf("jsonrpc list: %s", body)
			}
		default:
			code, body := restGet(t, ts, "/tasks/"+url.PathEscape(string(task))+"/pushNotificationConfigs", url.Values{"pageSize": {"1"}, "pageToken": {token}})
			if code != http.StatusOK || json.Unmarshal(body, &page) != nil {
				t.Fatalf("rest list: %d %s", code, body)
			}
		}
		if len(page.Configs) > 1 {
			t.Errorf("%s: a page of %d configs, asked for 1", tr, len(page.Configs))
		}
		for _, c := range page.Configs {
			ids = append(ids, c.ID)
		}
		if token = page.NextPageToken; token == "" {
			return ids
		}
	}
	t.Fatalf("%s: listing did not end: %v", tr, ids)
	return nil
}

// A SendMessage whose push config is invalid (N4: a URL delivery cannot
// use, a token or credentials that are not header-safe) is InvalidParams
// on every transport, creates no task, and its error names neither the
// token nor the credentials; a CreateTaskPushConfig of the same config is
// InvalidParams and stores nothing.
func TestSendMessageBadPushConfig(t *testing.T) {
	ts := startServer(t, config{Backend: "mem", Push: pushOn})
	bad := map[string]func(c *a2a.PushConfig){
		"ftp":          func(c *a2a.PushConfig) { c.URL = "ftp://hook.example/" },
		"port-99999":   func(c *a2a.PushConfig) { c.URL = "https://hook.example:99999/" },
		"token-crlf":   func(c *a2a.PushConfig) { c.Token += "\r\nX-Injected: 1" },
		"cred-nul":     func(c *a2a.PushConfig) { c.Auth.Credentials += "\x00" },
		"token-tab":    func(c *a2a.PushConfig) { c.Token += "\t" },
		"cred-newline": func(c *a2a.PushConfig) { c.Auth.Credentials += "\n" },
	}
	held := send(t, ts.clients[a2a.TransportProtocolJSONRPC], "", "holds configs")
	for name, edit := range bad {
		for _, tr := range transports {
			cfg := &a2a.PushConfig{URL: "https://hook.example/", Token: "secret-token-x",
				Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "secret-cred-y"}}
			edit(cfg)
			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("bad hook"))
			_, err := ts.clients[tr].SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{PushConfig: cfg}})
			if !errors.Is(err, a2a.ErrInvalidParams) {
				t.Errorf("%s: %s: SendMessage: %v, want InvalidParams", tr, name, err)
			}
			if err != nil && (strings.Contains(err.Error(), "secret-token-x") || strings.Contains(err.Error(), "secret-cred-y")) {
				t.Errorf("%s: %s: the error shows the config's secrets: %v", tr, name, err)
			}
			cfg.TaskID = held.ID
			if _, err := ts.clients[tr].CreateTaskPushConfig(t.Context(), cfg); !errors.Is(err, a2a.ErrInvalidParams) {
				t.Errorf("%s: %s: CreateTaskPushConfig: %v, want InvalidParams", tr, name, err)
			}
		}
	}
	resp, err := ts.clients[a2a.TransportProtocolJSONRPC].ListTasks(t.Context(), &a2a.ListTasksRequest{})
	if err != nil || len(resp.Tasks) != 1 {
		t.Errorf("tasks after refused sends: %v, %v", resp, err)
	}
	if ids := listAllPushConfigs(t, ts, a2a.TransportProtocolJSONRPC, held.ID); len(ids) != 0 {
		t.Errorf("configs stored: %v", ids)
	}
}

// A SendMessage continuing a task whose push config the outbox refuses
// (the task has MaxConfigsPerTask already: a valid config, so
// PushConfigCheck lets it through) fails without the config's token or
// credentials in its error: a2a-go v2.3.1 formats the whole config into
// the error of a failed save.
func TestSendMessageRefusedPushConfigHidesSecrets(t *testing.T) {
	ts := startServer(t, config{Backend: "mem", AgentName: agentTCK, Push: pushOn})
	for _, tr := range transports {
		c := ts.clients[tr]
		first := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("wait"))
		first.ID = "tck-input-required-" + string(tr)
		res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: first})
		task, ok := res.(*a2a.Task)
		if err != nil || !ok {
			t.Fatalf("%s: send: %v, %v", tr, res, err)
		}
		for i := range pushdelivery.MaxConfigsPerTask {
			if _, err := c.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: task.ID, ID: "c" + strconv.Itoa(i), URL: "https://hook.example/"}); err != nil {
				t.Fatalf("%s: create config %d: %v", tr, i, err)
			}
		}
		next := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("more"))
		next.ID, next.TaskID, next.ContextID = "tck-input-required-next-"+string(tr), task.ID, task.ContextID
		_, err = c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: next,
			Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: "https://hook.example/x", Token: "secret-token-x",
				Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "secret-cred-y"}}}})
		if err == nil {
			t.Fatalf("%s: a seventeenth config was accepted", tr)
		}
		if strings.Contains(err.Error(), "secret-token-x") || strings.Contains(err.Error(), "secret-cred-y") {
			t.Errorf("%s: the error shows the config's secrets: %v", tr, err)
		}
	}
}

// TestPushConfigErrorCodes (SPEC W3; review by helper-38): a push
// configuration that does not exist, on the caller's own task, is not
// found on every transport (-32001, 404, NOT_FOUND), and one created for
// the empty task ID is invalid params (-32602, INVALID_ARGUMENT) without
// the store's text. Both were internal errors: a2a-go does not map
// push.ErrPushConfigNotFound, and passed the empty ID to the config
// store, whose error carried "engine: empty task ID".
func TestPushConfigErrorCodes(t *testing.T) {
	ts := startServer(t, config{Backend: "mem", Push: pushOn})
	task := send(t, ts.clients["JSONRPC"], "", "mine")
	if got := string(jsonrpcCall(t, ts, "GetTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "id": "nosuch"})); !strings.Contains(got, `"code":-32001`) {
		t.Errorf("JSON-RPC get of a missing config: %s, want -32001", got)
	}
	if code, body := restGet(t, ts, "/tasks/"+string(task.ID)+"/pushNotificationConfigs/nosuch", nil); code != http.StatusNotFound {
		t.Errorf("HTTP+JSON get of a missing config: %d %s, want 404", code, body)
	}
	_, err := ts.pb.GetTaskPushNotificationConfig(t.Context(), &a2apb.GetTaskPushNotificationConfigRequest{TaskId: string(task.ID), Id: "nosuch"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("gRPC get of a missing config: %v, want NOT_FOUND", err)
	}
	got := string(jsonrpcCall(t, ts, "CreateTaskPushNotificationConfig", map[string]any{"taskId": "", "url": "https://hook.example/x"}))
	if !strings.Contains(got, `"code":-32602`) || strings.Contains(got, "engine") {
		t.Errorf("JSON-RPC create for the empty task ID: %s, want -32602 without the store's text", got)
	}
	_, err = ts.pb.CreateTaskPushNotificationConfig(t.Context(), &a2apb.TaskPushNotificationConfig{Url: "https://hook.example/x"})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("gRPC create for the empty task ID: %v, want INVALID_ARGUMENT", err)
	}
}
