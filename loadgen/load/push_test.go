package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"

	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/fakeclock"
)

func TestPushBookOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		revs []int64
		want []string
	}{
		{"in order with gaps", []int64{1, 2, 5, 9}, []string{pushOK, pushOK, pushOK, pushOK}},
		{"repeat of the last", []int64{1, 2, 2}, []string{pushOK, pushOK, pushDuplicate}},
		// A redelivery from an older cursor (a lost lease) repeats what
		// arrived already: duplicates, not order violations.
		{"replay from an older cursor", []int64{1, 2, 3, 2, 3, 4}, []string{pushOK, pushOK, pushOK, pushDuplicate, pushDuplicate, pushOK}},
		{"late lower revision", []int64{1, 3, 2}, []string{pushOK, pushOK, pushOrder}},
		{"late lower, then its repeat", []int64{4, 2, 2}, []string{pushOK, pushOrder, pushDuplicate}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newPushBook("", nil)
			var got []string
			for i, r := range tc.revs {
				got = append(got, b.record(delivery{task: "a", revision: r}))
				// Another task's lower revisions do not interfere.
				if o := b.record(delivery{task: "other", revision: int64(i + 1)}); o != pushOK {
					t.Errorf("other task's revision %d: %s", i+1, o)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("outcomes %v, want %v", got, tc.want)
			}
			s := b.stats()
			wantOrder, wantDup := int64(0), int64(0)
			for _, o := range tc.want {
				wantOrder += map[bool]int64{true: 1}[o == pushOrder]
				wantDup += map[bool]int64{true: 1}[o == pushDuplicate]
			}
			if s.Deliveries != int64(2*len(tc.revs)) || s.Tasks != 2 {
				t.Errorf("deliveries %d tasks %d, want %d and 2", s.Deliveries, s.Tasks, 2*len(tc.revs))
			}
			if s.OrderViolations != wantOrder || s.Duplicates != wantDup || len(s.Problems) != int(wantOrder) {
				t.Errorf("stats %+v: want %d order violations and %d duplicates, one problem per violation", s, wantOrder, wantDup)
			}
		})
	}
}

func TestPushBookLosses(t *testing.T) {
	b := newPushBook("", nil)
	b.sawState("delivered", a2a.TaskStateCompleted)
	b.record(delivery{task: "delivered", revision: 3, terminal: true})
	b.sawState("nonterminal-only", a2a.TaskStateCanceled)
	b.record(delivery{task: "nonterminal-only", revision: 1})
	b.sawState("nothing", a2a.TaskStateFailed)
	b.sawState("nothing", a2a.TaskStateFailed)  // seen twice, counted once
	b.sawState("working", a2a.TaskStateWorking) // not terminal: nothing owed
	// Delivered terminal before loadgen saw the task terminal: not a loss.
	b.record(delivery{task: "early", revision: 2, terminal: true})
	b.sawState("early", a2a.TaskStateCompleted)
	// A terminal delivery of a task loadgen never saw terminal is no loss.
	b.record(delivery{task: "unseen", revision: 1, terminal: true})

	s := b.stats()
	slices.Sort(s.LostTasks)
	if s.Losses != 2 || !slices.Equal(s.LostTasks, []string{"nonterminal-only", "nothing"}) {
		t.Errorf("losses %d %v, want 2 [nonterminal-only nothing]", s.Losses, s.LostTasks)
	}
	if s.Terminal != 4 {
		t.Errorf("terminal seen %d, want 4", s.Terminal)
	}
	if s.violations() != 2 {
		t.Errorf("violations %d, want 2 (the losses)", s.violations())
	}
}

func TestPushBookAwait(t *testing.T) {
	const grace = 30 * time.Second
	t.Run("returns when the last terminal event arrives", func(t *testing.T) {
		b := newPushBook("", nil)
		b.sawState("a", a2a.TaskStateCompleted)
		b.sawState("b", a2a.TaskStateCompleted)
		clock := fakeclock.New(time.Unix(0, 0)) // never advanced: only deliveries end the wait
		done := make(chan struct{})
		go func() { b.await(t.Context(), grace, clock.After); close(done) }()
		clock.WaitFor(grace)
		b.record(delivery{task: "a", revision: 1, terminal: true})
		b.record(delivery{task: "b", revision: 1, terminal: true})
		<-done
		if s := b.stats(); s.Losses != 0 {
			t.Errorf("losses %d after every terminal event arrived", s.Losses)
		}
	})
	t.Run("the grace period ends the wait", func(t *testing.T) {
		b := newPushBook("", nil)
		b.sawState("a", a2a.TaskStateCompleted)
		b.sawState("b", a2a.TaskStateCompleted)
		clock := fakeclock.New(time.Unix(0, 0))
		done := make(chan struct{})
		go func() { b.await(t.Context(), grace, clock.After); close(done) }()
		clock.WaitFor(grace)
		b.record(delivery{task: "a", revision: 1, terminal: true})
		b.record(delivery{task: "b", revision: 1}) // not its terminal event
		select {
		case <-done:
			t.Fatal("await returned with a terminal event still owed and the grace period running")
		default:
		}
		clock.Advance(grace)
		<-done
		if s := b.stats(); s.Losses != 1 || s.LostTasks[0] != "b" {
			t.Errorf("losses %d %v, want 1 [b]", s.Losses, s.LostTasks)
		}
	})
}

// pushRequest is a well-formed delivery of ev at rev, with token.
func pushRequest(t *testing.T, ev a2a.Event, rev int64, token string) *http.Request {
	t.Helper()
	body, err := json.Marshal(a2a.StreamResponse{Event: ev})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", pushContentType)
	r.Header.Set(pushRevisionHeader, strconv.FormatInt(rev, 10))
	if token != "" {
		r.Header.Set(pushTokenHeader, token)
	}
	return r
}

func TestPushHandler(t *testing.T) {
	const token = "tok"
	done := &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	canceled := &a2a.TaskStatusUpdateEvent{TaskID: "t2", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCanceled}}
	working := &a2a.TaskStatusUpdateEvent{TaskID: "t3", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	artifact := &a2a.TaskArtifactUpdateEvent{TaskID: "t3", ContextID: "c", Artifact: &a2a.Artifact{ID: "a"}}
	for _, tc := range []struct {
		name     string
		req      func() *http.Request
		status   int
		terminal a2a.TaskID // the task whose terminal event this delivers
	}{
		{"task, terminal", func() *http.Request { return pushRequest(t, done, 1, token) }, http.StatusNoContent, "t1"},
		{"status update, terminal", func() *http.Request { return pushRequest(t, canceled, 2, token) }, http.StatusNoContent, "t2"},
		{"status update, working", func() *http.Request { return pushRequest(t, working, 1, token) }, http.StatusNoContent, ""},
		{"artifact update", func() *http.Request { return pushRequest(t, artifact, 2, token) }, http.StatusNoContent, ""},
		{"content type with parameters", func() *http.Request {
			r := pushRequest(t, working, 3, token)
			r.Header.Set("Content-Type", pushContentType+"; charset=utf-8")
			return r
		}, http.StatusNoContent, ""},
		{"no revision", func() *http.Request {
			r := pushRequest(t, done, 1, token)
			r.Header.Del(pushRevisionHeader)
			return r
		}, http.StatusBadRequest, ""},
		{"zero revision", func() *http.Request { return pushRequest(t, done, 0, token) }, http.StatusBadRequest, ""},
		{"wrong token", func() *http.Request { return pushRequest(t, done, 1, "other") }, http.StatusBadRequest, ""},
		{"no token", func() *http.Request { return pushRequest(t, done, 1, "") }, http.StatusBadRequest, ""},
		{"plain JSON", func() *http.Request {
			r := pushRequest(t, done, 1, token)
			r.Header.Set("Content-Type", "application/json")
			return r
		}, http.StatusBadRequest, ""},
		{"a message, not a task event", func() *http.Request {
			return pushRequest(t, a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("x")), 1, token)
		}, http.StatusBadRequest, ""},
		{"no task ID", func() *http.Request { return pushRequest(t, &a2a.Task{}, 1, token) }, http.StatusBadRequest, ""},
		{"not JSON", func() *http.Request {
			r := pushRequest(t, done, 1, token)
			r.Body = http.NoBody
			return r
		}, http.StatusBadRequest, ""},
		{"GET", func() *http.Request {
			r := pushRequest(t, done, 1, token)
			r.Method = http.MethodGet
			return r
		}, http.StatusBadRequest, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newPushBook(token, nil)
			b.sawState("t1", a2a.TaskStateCompleted)
			b.sawState("t2", a2a.TaskStateCanceled)
			w := httptest.NewRecorder()
			b.ServeHTTP(w, tc.req())
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d (%s)", w.Code, tc.status, w.Body.String())
			}
			s := b.stats()
			if malformed := tc.status != http.StatusNoContent; (s.Malformed == 1) != malformed || s.Deliveries != 1 {
				t.Errorf("malformed %d deliveries %d, want malformed=%v and 1 delivery", s.Malformed, s.Deliveries, malformed)
			}
			want := []string{"t1", "t2"}
			want = slices.DeleteFunc(want, func(id string) bool { return id == string(tc.terminal) })
			slices.Sort(s.LostTasks)
			if !slices.Equal(s.LostTasks, want) {
				t.Errorf("still owed %v, want %v", s.LostTasks, want)
			}
		})
	}
}

func TestPushReceiverDownWindows(t *testing.T) {
	const down, every = time.Minute, 5 * time.Minute
	clock := fakeclock.New(time.Unix(1000, 0))
	b := newPushBook("", nil)
	p, err := listenPush("127.0.0.1:0", b, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	addr := strings.TrimSuffix(strings.TrimPrefix(p.URL(), "http://"), "/")
	post := func() error {
		resp, err := http.Post(p.URL(), pushContentType, strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := post(); err != nil {
		t.Fatalf("receiver not up: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cycleErr := make(chan error, 1)
	go func() { cycleErr <- p.cycle(ctx, down, every, clock.After) }()
	for i := range 2 {
		clock.WaitFor(every - down)
		clock.Advance(every - down)
		clock.WaitFor(down) // down() has run
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Fatalf("window %d: %s accepts connections while down", i+1, addr)
		}
		if n, d := p.windows(); n != i+1 || d != time.Duration(i)*down {
			t.Errorf("window %d open: %d windows, %v down", i+1, n, d)
		}
		clock.Advance(down)
		clock.WaitFor(every - down) // up() has run
		if err := post(); err != nil {
			t.Fatalf("window %d over: %s does not listen again: %v", i+1, addr, err)
		}
	}
	cancel()
	if err := <-cycleErr; err != nil {
		t.Fatal(err)
	}
	if n, d := p.windows(); n != 2 || d != 2*down {
		t.Errorf("%d windows, %v down; want 2 and %v", n, d, 2*down)
	}
	if s := b.stats(); s.Deliveries != 3 {
		t.Errorf("%d deliveries booked, want the 3 posts", s.Deliveries)
	}
}

func TestPushConfigValidate(t *testing.T) {
	remote := "http://127.0.0.1:1"
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{Target: remote, PushReceiver: "127.0.0.1:0"}, true},
		{Config{Target: remote, PushReceiver: "localhost:9200"}, true},
		{Config{Target: remote, PushReceiver: "[::1]:0"}, true},
		{Config{Target: remote, PushReceiver: "0.0.0.0:9200"}, false},
		{Config{Target: remote, PushReceiver: ":9200"}, false},
		{Config{Target: remote, PushReceiver: "0.0.0.0:9200", PushReceiverPublic: true}, true},
		{Config{Target: "mem", PushReceiver: "127.0.0.1:0"}, false},
		{Config{Target: "mem", PushURL: "http://127.0.0.1:9/"}, false},
		{Config{Target: remote, PushURL: "http://127.0.0.1:9/"}, true},
		{Config{Target: remote, PushURL: "ftp://x/"}, false},
		{Config{Target: remote, PushURL: "http://"}, false},
		{Config{Target: remote, PushReceiver: "127.0.0.1:0", PushDown: time.Minute, PushEvery: 5 * time.Minute}, true},
		{Config{Target: remote, PushReceiver: "127.0.0.1:0", PushDown: time.Minute, PushEvery: time.Minute}, false},
		{Config{Target: remote, PushURL: "http://127.0.0.1:9/", PushDown: time.Minute, PushEvery: 5 * time.Minute}, false},
	} {
		t.Run(fmt.Sprintf("%+v", tc.cfg), func(t *testing.T) {
			cfg := tc.cfg
			cfg.EnsureDefaults()
			if err := cfg.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// revisionSender is a push.Sender standing in for the server's delivery
// worker: it POSTs each event with the push headers, numbering a task's
// events 1, 2, … as its revisions, and skips the terminal events of the
// tasks drop picks.
type revisionSender struct {
	drop func(a2a.TaskID) bool
	mu   sync.Mutex
	revs map[a2a.TaskID]int64
}

func (s *revisionSender) SendPush(ctx context.Context, config *a2a.PushConfig, ev a2a.Event) error {
	s.mu.Lock()
	s.revs[ev.TaskInfo().TaskID]++
	rev := s.revs[ev.TaskInfo().TaskID]
	s.mu.Unlock()
	if su, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && su.Status.State.Terminal() && s.drop(su.TaskID) {
		return nil
	}
	body, err := json.Marshal(a2a.StreamResponse{Event: ev})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, config.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", pushContentType)
	req.Header.Set(pushRevisionHeader, strconv.FormatInt(rev, 10))
	req.Header.Set(pushTokenHeader, config.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("push: %s", resp.Status)
	}
	return nil
}

func TestRunRemotePush(t *testing.T) {
	for _, tc := range []struct {
		name   string
		drop   func(a2a.TaskID) bool
		losses bool
	}{
		{"every event delivered", func(a2a.TaskID) bool { return false }, false},
		{"terminal events lost", func(id a2a.TaskID) bool { return id[len(id)-1]%2 == 0 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memstore.New(memstore.Options{})
			t.Cleanup(func() { _ = store.Close() })
			sender := &revisionSender{drop: tc.drop, revs: map[a2a.TaskID]int64{}}
			base := startServer(t, store, a2asrv.WithPushNotifications(push.NewInMemoryStore(), sender))
			// Deliveries are synchronous here: none is owed after the
			// run, so no grace period.
			res := smallRun(t, Config{Target: base, Workload: "send-only", Ops: 100, Initial: 20,
				PushReceiver: "127.0.0.1:0", PushGrace: -1})
			p := res.Push
			if p == nil || p.Deliveries == 0 || p.Tasks != 120 || p.Terminal != 120 {
				t.Fatalf("push stats %+v: want deliveries to the 120 tasks, all seen terminal", p)
			}
			if p.OrderViolations+p.Malformed+p.Duplicates != 0 {
				t.Errorf("push stats %+v: order violations, malformed deliveries or duplicates", p)
			}
			if got := res.Err() != nil && p.Losses > 0; got != tc.losses {
				t.Errorf("losses %d, run error %v; want losses=%v", p.Losses, res.Err(), tc.losses)
			}
			var out strings.Builder
			_ = res.WriteTable(&out)
			if !strings.Contains(out.String(), "push: ") || strings.Contains(out.String(), "PUSH VIOLATION lost") != tc.losses {
				t.Errorf("report's push lines do not match losses=%v:\n%s", tc.losses, out.String())
			}
		})
	}
}

// TestPushBookTerminalLag: the lag from the moment loadgen saw a task
// terminal to its terminal event's arrival, by percentile; a terminal
// event that arrived before loadgen saw the task counts 0.
func TestPushBookTerminalLag(t *testing.T) {
	now := time.Unix(1_000, 0)
	b := newPushBook("", nil)
	b.now = func() time.Time { return now }
	if s := b.stats(); s.TerminalLagP50Ms != 0 || s.TerminalLagP99Ms != 0 {
		t.Fatalf("no task: lag %v/%v, want 0", s.TerminalLagP50Ms, s.TerminalLagP99Ms)
	}
	for i := range 99 { // seen, then delivered 10 ms later
		id := a2a.TaskID(fmt.Sprint("t", i))
		b.sawState(id, a2a.TaskStateCompleted)
		now = now.Add(10 * time.Millisecond)
		b.record(delivery{task: id, revision: 2, terminal: true})
	}
	b.sawState("slow", a2a.TaskStateCompleted)
	now = now.Add(3 * time.Second)
	b.record(delivery{task: "slow", revision: 2, terminal: true})
	b.record(delivery{task: "early", revision: 2, terminal: true})
	b.sawState("early", a2a.TaskStateCompleted)
	s := b.stats()
	if s.TerminalLagP50Ms < 9.9 || s.TerminalLagP50Ms > 10.1 || s.TerminalLagP99Ms < 9.9 || s.TerminalLagP99Ms > 10.1 {
		t.Errorf("lag p50 %v ms, p99 %v ms; want 10 and 10 (one slow task of 101)", s.TerminalLagP50Ms, s.TerminalLagP99Ms)
	}
	b.sawState("slow2", a2a.TaskStateCompleted)
	now = now.Add(3 * time.Second)
	b.record(delivery{task: "slow2", revision: 2, terminal: true})
	if s := b.stats(); s.TerminalLagP99Ms < 2990 || s.TerminalLagP99Ms > 3010 {
		t.Errorf("lag p99 %v ms with two tasks of 3 s in 102, want 3000", s.TerminalLagP99Ms)
	}
}
